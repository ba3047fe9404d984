"""Parity with the official BitDelta code on the shared fixtures (tiny Llama, official diff files)."""

import copy
import json

import pytest
import torch
from bitdelta_testdata import FIXTURES, MODULES_CHECKED, hf_model, logit_error

from zoo.bitdelta._bits import unpack_bits
from zoo.bitdelta.convert import from_official
from zoo.bitdelta.delta import compress
from zoo.bitdelta.model import BitDeltaLinear, apply_deltas_, use_tenants

MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())


def _assert_same_as_official(delta, official):
    masks = [k[:-5] for k in official if k.endswith(".mask")]
    assert delta.modules == masks  # the official rule picks the same 14 layers, in module order
    for name in masks:
        assert torch.equal(delta.masks[name], official[f"{name}.mask"]), name  # bit-exact words
        assert delta.scales[name].dtype == torch.float32 and delta.scales[name].dim() == 0
        assert delta.scales[name].item() == official[f"{name}.coeff"].item(), name  # exactly, 0 ulp
    carried = [k for k in official if not k.endswith((".mask", ".coeff"))]
    assert list(delta.params) == carried  # every carried tensor differs from the base here
    for key in carried:
        assert delta.params[key].dtype == official[key].dtype
        assert torch.equal(delta.params[key], official[key]), key


@pytest.mark.parametrize("finetune,diff", [("finetune", "diff_untrained"), ("finetune_b", "diff_untrained_b")])
def test_compress_fp32_matches_official(models, official, finetune, diff):
    delta = compress(models["base"], models[finetune], progress=False)
    _assert_same_as_official(delta, official[diff])


def test_compress_bf16_matches_official(official, reference):
    base, finetune = hf_model("base", torch.bfloat16), hf_model("finetune", torch.bfloat16)
    delta = compress(base, finetune, progress=False)
    _assert_same_as_official(delta, official["diff_untrained_bf16"])
    assert delta.base_dtype == "bfloat16"
    merged = apply_deltas_(base, [delta], merged=True)
    for name in MODULES_CHECKED:
        assert torch.equal(merged.get_submodule(name).weight, reference[f"{name}.weight_reconstructed_bf16"])


def test_zero_deltas_get_plus_scale(delta_a, reference):
    """Planted exact zeros (incl. inputs 31 and 63 on the int32 sign bit) and the frozen layer are bit 1."""
    q = "model.layers.0.self_attn.q_proj"
    bits = unpack_bits(delta_a.masks[q], 64)  # (in, out)
    for out_i, in_i in MANIFEST["finetune_a"]["zero_entries"][q]:
        assert reference[f"{q}.delta"][out_i, in_i] == 0 and bits[in_i, out_i] == 1
    down = "model.layers.1.mlp.down_proj"
    assert (reference[f"{down}.delta"][7] == 0).all()
    assert unpack_bits(delta_a.masks[down], 128)[:, 7].all()  # output row 7 (column 7 of the packed layout)
    frozen = "model.layers.1.self_attn.v_proj"
    assert delta_a.scales[frozen].item() == 0.0 and (delta_a.masks[frozen] == -1).all()


def test_scales_match_the_manifest(delta_a):
    for name, info in MANIFEST["modules"].items():
        assert delta_a.scales[name].item() == pytest.approx(info["coeff_fp32"], rel=1e-7, abs=0)


@pytest.mark.parametrize("merged", [True, False])
def test_reconstruction_matches_official(models, delta_a, delta_b, logits, reference, merged):
    for delta, key in ((delta_a, "logits_reconstructed"), (delta_b, "logits_reconstructed_b")):
        model = apply_deltas_(copy.deepcopy(models["base"]), [delta], merged=merged)
        assert logit_error(model, logits, key) <= 1e-5
        if merged and delta is delta_a:
            for name in MODULES_CHECKED:
                assert torch.equal(model.get_submodule(name).weight, reference[f"{name}.weight_reconstructed"])


def test_calibrated_official_delta_reconstructs(models, official, logits):
    delta = from_official(official["diff"], base="base", base_model=models["base"])
    model = apply_deltas_(copy.deepcopy(models["base"]), [delta], merged=True)
    assert logit_error(model, logits, "logits_reconstructed_calibrated") <= 1e-5


def test_multitenant_batch_matches_official_and_per_tenant_models(models, delta_a, delta_b, logits):
    ids, tenant_of_row = logits["input_ids"], logits["multitenant_tenant_of_row"]
    server = apply_deltas_(copy.deepcopy(models["base"]), [delta_a, delta_b], merged=False)
    layers = [m for m in server.modules() if isinstance(m, BitDeltaLinear)]
    assert len(layers) == 14 and all(m.num_tenants == 2 for m in layers)
    with torch.no_grad(), use_tenants(server, tenant_of_row):
        out = server(input_ids=ids).logits
    assert (out - logits["logits_multitenant"]).abs().max().item() <= 1e-5
    for row, tenant in enumerate(tenant_of_row.tolist()):
        alone = apply_deltas_(copy.deepcopy(models["base"]), [(delta_a, delta_b)[tenant]], merged=True)
        with torch.no_grad():
            expected = alone(input_ids=ids[row : row + 1]).logits
        assert (out[row : row + 1] - expected).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match="use_tenants"):
        server(input_ids=ids)


def test_unwrapped_merged_model_is_a_plain_fine_tune(models, delta_a, logits):
    from zoo.bitdelta.model import unwrap_merged_

    model = unwrap_merged_(apply_deltas_(copy.deepcopy(models["base"]), [delta_a], merged=True))
    assert not any(isinstance(m, BitDeltaLinear) for m in model.modules())
    assert set(model.state_dict()) == set(models["base"].state_dict())  # the HF layout again
    assert logit_error(model, logits, "logits_reconstructed") <= 1e-5
    with pytest.raises(ValueError, match="not merged"):
        unwrap_merged_(apply_deltas_(copy.deepcopy(models["base"]), [delta_a], merged=False))
