"""The delta as a hub repo: save, zoo.load (base named inside), metadata, base verification, any zoo model."""

import copy
import json

import pytest
import torch
from bitdelta_testdata import FIXTURES, hf_model, logit_error, reconstruct
from safetensors import safe_open

import zoo
from zoo.bitdelta.delta import BitDelta, compress
from zoo.io import weights_fingerprint
from zoo.bitdelta.model import BitDeltaLinear, apply_deltas_
from zoo.bitdelta.module import BitDeltaModule

BASE = str(FIXTURES / "base")


@pytest.fixture(scope="module")
def repo(tmp_path_factory, delta_a):
    folder = tmp_path_factory.mktemp("delta") / "delta-a"
    delta_a.save(folder)
    return folder


def test_repo_metadata_names_the_base(repo, delta_a, models):
    config = json.loads((repo / "config.json").read_text())
    assert config["method"] == "bitdelta" and config["model_type"] == "bitdelta"
    hp = config["hparams"]
    assert hp["base"] == BASE and hp["base_dtype"] == "float32"
    assert hp["base_sha256"] == weights_fingerprint(models["base"]) == delta_a.base_sha256
    assert hp["modules"]["model.layers.0.self_attn.q_proj"] == [64, 64]
    with safe_open(str(repo / "model.safetensors"), framework="pt") as f:
        meta = f.metadata()
        assert f.get_tensor("model.layers.0.mlp.down_proj.mask").dtype == torch.int32
        assert f.get_tensor("model.layers.0.mlp.down_proj.coeff").shape == ()
    assert meta["base"] == BASE and meta["base_sha256"] == hp["base_sha256"] and meta["bitdelta_format"] == "1"
    assert "LSB first" in meta["bit_order"] and "delta == 0 gives +scale" in meta["sign_convention"]
    assert json.loads(meta["modules"]) == hp["modules"]
    assert json.loads(meta["dtypes"]) == {"mask": "int32", "coeff": "float32", "params": ["float32"]}
    # packed bits are 1/32 of the fp32 weights they replace
    mask_bytes = sum(t.numel() * 4 for t in delta_a.masks.values())
    assert mask_bytes * 32 == sum(o * i * 4 for o, i in delta_a.shapes.values())


def test_zoo_load_applies_the_delta_to_its_base_and_saves_it_back(repo, tmp_path, delta_a, models, logits):
    loaded = {merged: zoo.load(repo, merged=merged) for merged in (True, False)}
    for merged, model in loaded.items():
        assert isinstance(model, BitDeltaModule) and not model.training
        layers = [m for m in model.modules() if isinstance(m, BitDeltaLinear)]
        assert len(layers) == 14 and all(m.merged is merged for m in layers)
        assert logit_error(model, logits, "logits_reconstructed") <= 1e-5
    in_memory = apply_deltas_(copy.deepcopy(models["base"]), [delta_a], merged=True)
    with torch.no_grad():
        a, b, c = (m(input_ids=logits["input_ids"]).logits for m in (in_memory, loaded[True], loaded[False]))
    assert torch.equal(a, b)
    assert (b - c).abs().max().item() <= 1e-5  # merged vs unmerged: same model, other summation order
    loaded[True].save_pretrained(tmp_path / "again")
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (repo / "model.safetensors").read_bytes()
    again = BitDelta.load(tmp_path / "again")
    assert again.shapes == delta_a.shapes and sorted(again.params) == sorted(delta_a.params)


def test_loading_refuses_a_different_base(repo):
    with pytest.raises(ValueError, match="base weights do not match"):
        zoo.load(repo, base=str(FIXTURES / "finetune_b"))
    with pytest.raises(ValueError, match="float32"):  # same checkpoint, other dtype: other weights
        zoo.load(repo, base=hf_model("base", torch.bfloat16))
    model = zoo.load(repo, base=str(FIXTURES / "finetune_b"), verify_base=False)  # explicit opt-out works
    assert isinstance(model, BitDeltaModule)


def test_carried_tensors_published_in_bf16_run_in_the_bases_dtype(repo, tmp_path, delta_a, models, logits):
    from zoo.cli import main

    assert main(["publish", str(repo), str(tmp_path / "small"), "--dtype", "bfloat16"]) == 0
    with safe_open(str(tmp_path / "small" / "model.safetensors"), framework="pt") as f:
        assert json.loads(f.metadata()["dtypes"])["params"] == ["bfloat16"]
        assert all(f.get_tensor(k).dtype == torch.bfloat16 for k in delta_a.params)
        assert f.get_tensor("model.layers.0.mlp.down_proj.coeff").dtype == torch.float32  # scales stay fp32
    saved = sum(t.numel() * 2 for t in delta_a.params.values())
    assert BitDelta.load(tmp_path / "small").nbytes() == delta_a.nbytes() - saved
    model = zoo.load(tmp_path / "small")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    rounded = BitDelta(**{**delta_a.__dict__, "params": {k: v.bfloat16() for k, v in delta_a.params.items()}})
    reference = apply_deltas_(copy.deepcopy(models["base"]), [rounded], merged=True)
    with torch.no_grad():
        out = model(input_ids=logits["input_ids"]).logits
        assert torch.equal(out, reference(input_ids=logits["input_ids"]).logits)
        assert not torch.equal(out, logits["logits_reconstructed"])  # the rounding is real, and small:
        assert (out - logits["logits_reconstructed"]).abs().max().item() < 0.05
    model.save_pretrained(tmp_path / "again")  # reloaded, it keeps the storage dtype
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (tmp_path / "small" / "model.safetensors").read_bytes()


def test_carried_tensors_only_where_they_differ(models):
    finetune = copy.deepcopy(models["finetune"])
    with torch.no_grad():
        finetune.model.norm.weight.copy_(models["base"].model.norm.weight)  # this one stays at the base value
    delta = compress(models["base"], finetune, progress=False)
    assert "model.norm.weight" not in delta.params and "lm_head.weight" in delta.params
    assert len(delta.params) == 6


def test_module_selection_by_pattern(models):
    delta = compress(models["base"], models["finetune"], select=["*.mlp.*"], exclude=["*.down_proj"], progress=False)
    assert delta.modules == [f"model.layers.{i}.mlp.{p}" for i in range(2) for p in ("gate_proj", "up_proj")]
    # attention projections are now carried at full precision (they differ from the base), except the frozen one
    assert "model.layers.0.self_attn.q_proj.weight" in delta.params
    assert "model.layers.1.self_attn.v_proj.weight" not in delta.params
    with pytest.raises(ValueError, match="no layer"):
        compress(models["base"], models["finetune"], select=["*.nothing"], progress=False)
    with pytest.raises(ValueError, match="only Linear"):
        compress(models["base"], models["finetune"], select=["*.input_layernorm"], progress=False)


# ----------------------------------------------------------------------------- any zoo model as the base
def _toy_pair(tmp_path):
    from toy import ToyRegressor

    torch.manual_seed(0)
    base = ToyRegressor(width=64, depth=2)
    finetune = copy.deepcopy(base)
    with torch.no_grad():
        for p in finetune.net.parameters():
            p.add_(0.01 * torch.randn_like(p))
    base.save_pretrained(tmp_path / "toy-base")
    return zoo.load(tmp_path / "toy-base"), finetune.eval()


def test_a_zoo_model_as_base_with_a_relative_path(tmp_path):
    base, finetune = _toy_pair(tmp_path)
    delta = compress(base, finetune, select=["net.*"], base_name="../toy-base", progress=False)
    assert delta.modules == ["net.0", "net.2", "net.4"]  # Linear 4->64 (padded to 32 bits), 64->64, 64->1
    assert sorted(delta.params) == ["net.0.bias", "net.2.bias", "net.4.bias"]
    delta.save(tmp_path / "toy-delta")
    x = torch.randn(5, 4)
    for merged in (True, False):
        model = zoo.load(tmp_path / "toy-delta", merged=merged)  # base found beside the delta, loaded by zoo.load
        assert type(model.model).__name__ == "ToyRegressor"
        with torch.no_grad():
            torch.testing.assert_close(model(x), reconstruct(base, finetune, delta)(x), rtol=0, atol=1e-6)


def test_catalog_delta_loads_its_catalog_base(tmp_path, monkeypatch):
    """zoo.load("<delta name>") with both repos in the embedded hub: the delta names its base by catalog name."""
    from zoo.io import sha256_file
    from zoo.registry import FileSpec, ModelEntry, register_model

    hub = tmp_path / "hub"
    base, finetune = _toy_pair(tmp_path)
    base.save_pretrained(hub / "bitdelta-test-toy-base")
    delta = compress(base, finetune, select=["net.*"], base_name="bitdelta-test-toy-base", progress=False)
    delta.save(hub / "bitdelta-test-toy-delta")
    monkeypatch.setenv("ZOO_HUB", str(hub))
    for name, base_name in (("bitdelta-test-toy-base", None), ("bitdelta-test-toy-delta", "bitdelta-test-toy-base")):
        files = tuple(FileSpec(f.name, sha256_file(f), f.stat().st_size) for f in sorted((hub / name).iterdir()))
        register_model(ModelEntry(name=name, method="bitdelta" if base_name else "toy", files=files, base_model=base_name))
    model = zoo.load("bitdelta-test-toy-delta")
    x = torch.randn(3, 4)
    with torch.no_grad():
        expected = zoo.load(tmp_path / "toy-base")
        torch.testing.assert_close(model(x), zoo.load(hub / "bitdelta-test-toy-delta")(x), rtol=0, atol=0)
        assert not torch.allclose(model(x), expected(x))  # the delta changed the base
