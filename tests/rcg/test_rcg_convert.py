"""Converters: safe loading, strict key matching, official key quirks, `zoo convert rcg`, the catalog."""

import argparse
import json

import pytest
import torch
from rcg_testdata import FIXTURES, TINY, io
from safetensors.torch import load_file

import zoo
from zoo.convert import map_keys
from zoo.rcg.convert import convert_checkpoint, convert_moco, convert_rdm, detect_kind, load_official


def test_official_files_need_the_namespace_allowlist():
    path = FIXTURES / "rdm_tiny" / "rdm_ckpt.pth"
    with pytest.raises(Exception, match="Namespace"):
        torch.load(path, weights_only=True)
    ckpt = load_official(path)
    assert isinstance(ckpt["args"], argparse.Namespace)


@pytest.mark.parametrize("name,model_type", [("moco", "rcg-mocov3"), ("rdm", "rcg-rdm"), ("vqgan", "rcg-vqgan"),
                                             ("mage", "rcg-mage"), ("pipeline", "rcg-pipeline")])
def test_converted_repos_reload_strictly(converted, name, model_type):
    config = json.loads((converted[name] / "config.json").read_text())
    assert config["model_type"] == model_type and config["method"] == "rcg"
    model = zoo.load(converted[name])
    saved = load_file(str(converted[name] / "model.safetensors"))
    assert set(saved) == set(model.state_dict())  # every tensor is saved and used
    bad = dict(saved)
    bad["unexpected.weight"] = torch.zeros(1)
    with pytest.raises(RuntimeError, match="unexpected"):
        model.load_weights_(bad)


def test_detect_kind():
    kinds = {p: detect_kind(load_official(FIXTURES / p)) for p in
             ["encoder_tiny/moco_vit_tiny.pth.tar", "rdm_tiny/rdm_ckpt.pth", "vqgan_tiny/vqgan_tiny.ckpt",
              "mage_tiny/mage_ckpt.pth"]}
    assert list(kinds.values()) == ["moco", "rdm", "vqgan", "mage"]


def test_momentum_encoder_is_kept_apart_from_the_base_encoder():
    ckpt = load_official(FIXTURES / "encoder_tiny" / "moco_vit_tiny.pth.tar")
    module = convert_moco(ckpt, TINY)
    sd = ckpt["state_dict"]
    assert torch.equal(module.encoder.blocks[0].attn.qkv.weight, sd["module.base_encoder.blocks.0.attn.qkv.weight"])
    assert not torch.equal(module.encoder.blocks[0].attn.qkv.weight, module.momentum_encoder.blocks[0].attn.qkv.weight)


def test_vit_large_key_renames():
    """The ViT-L file's misnamed keys (blocks.13.norm13, ...) are fixed by the converter."""
    ckpt = load_official(FIXTURES / "encoder_tiny" / "moco_vit_tiny.pth.tar")
    sd = ckpt["state_dict"]
    renamed = {}
    for key, value in sd.items():  # rename block 1 like the ViT-L file's blocks 13/14
        key = key.replace("blocks.1.norm1.", "blocks.13.norm13.").replace("blocks.1.mlp.fc1.", "blocks.13.mlp.fc13.")
        key = key.replace("blocks.0.norm2.", "blocks.14.norm14.").replace("blocks.0.mlp.fc2.", "blocks.14.mlp.fc14.")
        renamed[key] = value
    from zoo.rcg.convert import _encoder_rules

    fixed = map_keys(renamed, [*_encoder_rules("module.base_encoder.", ""), ("", None)])
    assert "blocks.13.norm1.weight" in fixed and "blocks.13.mlp.fc1.bias" in fixed
    assert "blocks.14.norm2.weight" in fixed and "blocks.14.mlp.fc2.weight" in fixed
    assert not any(k.split(".")[2].startswith(("norm13", "norm14", "fc13", "fc14")) for k in fixed if k.count(".") > 2)


def test_unknown_official_keys_are_an_error():
    ckpt = load_official(FIXTURES / "rdm_tiny" / "rdm_ckpt.pth")
    ckpt["state_dict"] = dict(ckpt["state_dict"], **{"first_stage_model.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match="unexpected keys"):
        convert_rdm(ckpt, TINY)


def test_heads_must_be_given_for_unknown_widths():
    with pytest.raises(ValueError, match="num_heads"):
        convert_moco(load_official(FIXTURES / "encoder_tiny" / "moco_vit_tiny.pth.tar"))


def test_ema_bookkeeping_is_converted(converted):
    module = zoo.load(converted["rdm"])
    assert int(module.ema.num_updates) == 123456 and module.hparams.ema_decay == pytest.approx(0.9999)


def test_cli_convert(tmp_path):
    from zoo.cli import main

    out = tmp_path / "vq"
    assert main(["convert", "rcg", str(FIXTURES / "vqgan_tiny" / "vqgan_tiny.ckpt"), "--out", str(out)]) == 0
    data = io("vqgan_tiny")
    assert torch.equal(zoo.load(out).encode(data["images"]), data["codes"])


def test_catalog_entries():
    names = zoo.list_models("rcg-imagenet256*")
    assert names == ["rcg-imagenet256", "rcg-imagenet256-classcond", "rcg-imagenet256-mage-b",
                     "rcg-imagenet256-mage-b-classcond"]
    main = zoo.registry.get_entry("rcg-imagenet256")
    assert not main.released and main.converter == "zoo.rcg.convert:from_upstream"
    assert main.metrics["fid"] == 2.15 and main.defaults["cfg"] == 6.0 and main.defaults["temperature"] == 11.0
    assert all(f.sha256 is None and f.url.startswith("https://") for f in main.upstream)
    assert zoo.registry.get_entry("rcg-imagenet256-mage-b").defaults["cfg"] == 1.0


def test_pipeline_needs_mage_and_rdm():
    with pytest.raises(ValueError, match="kinds"):
        convert_checkpoint([FIXTURES / "vqgan_tiny" / "vqgan_tiny.ckpt", FIXTURES / "rdm_tiny" / "rdm_ckpt.pth"], TINY)


def test_vq_loss_is_the_legacy_form():
    from zoo.rcg.model import VectorQuantizer

    vq = VectorQuantizer(4, 2, beta=0.25)
    z = torch.randn(1, 2, 2, 2, requires_grad=True)
    _, loss, _ = vq(z)
    loss.backward()
    z_q = vq.lookup(vq.codes(z), (2, 2))
    # d loss / d z comes from the commitment term only, with weight 1 (legacy): 2 (z - z_q) / numel
    assert torch.allclose(z.grad, 2 * (z - z_q).detach() / z.numel(), atol=1e-6)


def test_upstream_entry_downloads_converts_and_caches(file_server):
    """An upstream entry like rcg-imagenet256, served from a loopback file server: first load downloads the
    official files (unpinned: trust on first use) and converts them (``from_upstream``) with the entry's sampling
    defaults; later loads reuse the converted repo."""
    from zoo.rcg.pipeline import SAMPLING_DEFAULTS
    from zoo.registry import FileSpec, ModelEntry, register_model

    files = []
    for name, path in (("mage-vitl.pth", "mage_tiny/mage_ckpt.pth"), ("rdm-mocov3vitl.pth", "rdm_tiny/rdm_ckpt.pth")):
        file_server.files[f"/{path}"] = (FIXTURES / path).read_bytes()
        files.append(FileSpec(name, None, None, f"{file_server.url}/{path}"))
    entry = zoo.registry.get_entry("rcg-imagenet256")
    register_model(ModelEntry(**{**entry.__dict__, "name": "rcg-tiny-loopback", "upstream": tuple(files),
                                 "convert_args": TINY, "defaults": {"cfg": 1.5, "steps": 3, "rdm_steps": 4}}))
    model = zoo.load("rcg-tiny-loopback")
    assert model.sampling_defaults == {**SAMPLING_DEFAULTS, "cfg": 1.5, "steps": 3, "rdm_steps": 4}
    images = model.sample(2, seed=3)
    assert images.shape == (2, 3, 32, 32)
    downloads = len(file_server.hits)
    again = zoo.load("rcg-tiny-loopback")  # converted and cached: no request any more
    assert len(file_server.hits) == downloads and torch.equal(again.sample(2, seed=3), images)
