"""Head counts of converted RCG checkpoints come from what the official files name (MAGE's ``args.model`` and
``args.pretrained_enc_arch``, MoCo v3's ``arch``, the RDM's ``args.config``) or from ``--config``; never from the
width (issue 28)."""

import argparse

import pytest
import torch
from rcg_testdata import FIXTURES, TINY

from zoo.rcg import convert as rc
from zoo.rcg.convert import convert_checkpoint, infer_encoder_config, infer_mage_config
from zoo.rcg.model import ENCODER_CONFIGS, MAGE_CONFIGS


def _meta(*shape):
    return torch.empty(shape, device="meta")


def _encoder_sd(dim: int, depth: int) -> dict:
    """The tensors config inference reads, at a real ViT's width (shapes only, no memory)."""
    sd = {"pos_embed": _meta(1, 197, dim), "patch_embed.proj.weight": _meta(dim, 3, 16, 16),
          "blocks.0.mlp.fc1.weight": _meta(4 * dim, dim), "head.0.weight": _meta(4096, dim),
          "head.6.weight": _meta(256, 4096)}
    sd.update({f"blocks.{i}.norm1.weight": _meta(dim) for i in range(depth)})
    return sd


def _mage_sd(dim: int, depth: int, dec: int, dec_depth: int) -> dict:
    sd = {"token_emb.word_embeddings.weight": _meta(2025, dim), "token_emb.position_embeddings.weight": _meta(257, dim),
          "decoder_embed.weight": _meta(dec, dim), "blocks.0.mlp.fc1.weight": _meta(4 * dim, dim),
          "fake_latent": _meta(1, 256)}
    sd.update({f"blocks.{i}.norm1.weight": _meta(dim) for i in range(depth)})
    sd.update({f"decoder_blocks.{i}.norm1.weight": _meta(dec) for i in range(dec_depth)})
    return sd


def test_width_alone_never_sets_the_heads():
    """MoCo v3's ViT-S has 12 heads at width 384 where timm's has 6: the old width table guessed 6."""
    with pytest.raises(ValueError, match="num_heads") as err:
        infer_encoder_config(_encoder_sd(384, 12), arch="vit_small", source="arch field")
    assert "'vit_small', which is not an official model" in str(err.value) and "--config" in str(err.value)
    assert infer_encoder_config(_encoder_sd(384, 12), {"num_heads": 12})["num_heads"] == 12
    with pytest.raises(ValueError, match="no args.model"):
        infer_mage_config(_mage_sd(768, 12, 768, 8))  # the old code gave 12 / 16 by width


@pytest.mark.parametrize("model", sorted(MAGE_CONFIGS))
def test_official_mage_names_give_the_heads(model):
    named = MAGE_CONFIGS[model]
    sd = _mage_sd(named["embed_dim"], named["depth"], named["decoder_embed_dim"], named["decoder_depth"])
    cfg = infer_mage_config(sd, model=model)
    assert (cfg["num_heads"], cfg["decoder_num_heads"]) == (named["num_heads"], named["decoder_num_heads"])
    with pytest.raises(ValueError, match="weights do not fit"):
        infer_mage_config(_mage_sd(named["embed_dim"], 2, named["decoder_embed_dim"], 2), model=model)
    with pytest.raises(ValueError, match="names 'mage_vit"):  # a config contradicting the file is refused
        infer_mage_config(sd, {"num_heads": named["num_heads"] // 2}, model=model)


@pytest.mark.parametrize("path, arch", [
    ("config/rdm/mocov3vitb_simplemlp_l12_w1536.yaml", "mocov3_vit_base"),
    ("config/rdm/mocov3vitl_simplemlp_l12_w1536_classcond.yaml", "mocov3_vit_large"),
])
def test_rdm_config_path_names_the_encoder(path, arch):
    named = ENCODER_CONFIGS[arch]
    assert rc._rdm_encoder_arch(argparse.Namespace(config=path)) == arch
    cfg = infer_encoder_config(_encoder_sd(named["embed_dim"], named["depth"]), arch=arch, source="args.config")
    assert cfg["num_heads"] == named["num_heads"]


def test_fixture_checkpoints_need_the_config_and_say_which(tmp_path):
    """The tiny fixtures name models that are not official ones, so their head counts must be given."""
    for path, name in [("mage_tiny/mage_ckpt.pth", "mage_vit_tiny_fixture"), ("rdm_tiny/rdm_ckpt.pth", "rdm_tiny.yaml"),
                       ("encoder_tiny/moco_vit_tiny.pth.tar", "vit_tiny_fixture")]:
        with pytest.raises(ValueError, match=f"'{name}', which is not an official model"):
            convert_checkpoint([FIXTURES / path])
    with pytest.raises(ValueError, match="does not divide"):
        convert_checkpoint([FIXTURES / "mage_tiny/mage_ckpt.pth"], {**TINY, "mage": {"num_heads": 5}})


def test_named_official_files_convert_without_config(monkeypatch):
    """Registered as official names (with the fixture's true head counts), the files' own args suffice."""
    monkeypatch.setitem(MAGE_CONFIGS, "mage_vit_tiny_fixture",
                        dict(embed_dim=24, depth=2, num_heads=2, decoder_embed_dim=16, decoder_depth=2, decoder_num_heads=2))
    monkeypatch.setitem(ENCODER_CONFIGS, "mocov3_vit_tiny", dict(embed_dim=16, depth=2, num_heads=2))
    monkeypatch.setitem(rc.MOCO_ARCHS, "vit_tiny_fixture", "mocov3_vit_tiny")
    monkeypatch.setitem(rc.RDM_CONFIG_ENCODERS, "rdm", "mocov3_vit_tiny")
    for path in ("mage_tiny/mage_ckpt.pth", "rdm_tiny/rdm_ckpt.pth", "encoder_tiny/moco_vit_tiny.pth.tar"):
        named, given = convert_checkpoint([FIXTURES / path]), convert_checkpoint([FIXTURES / path], TINY)
        assert named.hparams == given.hparams, path
