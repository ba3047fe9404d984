"""Official diff.pt files: the reader, conversion to zoo repos, and the Mistral catalog entries."""

import copy

import pytest
import torch
from bitdelta_testdata import FIXTURES, logit_error

import zoo
from zoo.bitdelta.convert import from_official, from_upstream
from zoo.bitdelta.delta import BitDelta
from zoo.io import weights_fingerprint


def test_reader_returns_plain_contiguous_tensors(official):
    state = official["diff_untrained"]
    assert len(state) == 35
    assert all(type(v) is torch.Tensor and v.is_contiguous() and not v.requires_grad for v in state.values())
    assert state["model.layers.0.self_attn.q_proj.coeff"].shape == ()


def test_official_to_zoo_and_back_is_lossless(official, models):
    state = official["diff_untrained_bf16"]
    delta = from_official(state, base="base")
    assert delta.base_sha256 is None and delta.base_dtype == "bfloat16"
    back = delta.state_dict()
    assert list(back) == list(state)  # same keys, same (official) order
    assert all(torch.equal(back[k], state[k]) and back[k].dtype == state[k].dtype for k in state)


def test_conversion_with_the_base_records_it_and_drops_unchanged_tensors(official, models):
    state = dict(official["diff_untrained"])
    state["model.norm.weight"] = models["base"].model.norm.weight.detach().clone()  # as if never fine-tuned
    delta = from_official(state, base="base", base_model=models["base"])
    assert delta.base_sha256 == weights_fingerprint(models["base"])
    assert "model.norm.weight" not in delta.params and len(delta.params) == 6


def test_catalog_lists_the_official_mistral_deltas():
    names = zoo.list_models("bitdelta-mistral-7b-*", method="bitdelta")
    assert len(names) == 6 and "bitdelta-mistral-7b-zephyr-7b-beta" in names
    for name in names:
        entry = zoo.registry.get_entry(name)
        assert not entry.released and entry.convert_args["base"] == "mistralai/Mistral-7B-v0.1"
        (spec,) = entry.upstream
        assert spec.sha256 is None and spec.url == (
            f"hf://FasterDecoding/BitDelta_Mistral_combo/{entry.architecture['hf_folder']}/diff.pt")


def test_upstream_converter_on_an_official_file(tmp_path, logits):
    entry = zoo.registry.get_entry("bitdelta-mistral-7b-openchat-3.5")
    fixture_entry = copy.copy(entry)
    object.__setattr__(fixture_entry, "convert_args", {**entry.convert_args, "num_modules": 14})
    from_upstream({"openchat_3.5_bitdelta/diff.pt": FIXTURES / "diff.pt"}, tmp_path / "converted", fixture_entry)
    delta = BitDelta.load(tmp_path / "converted")
    assert delta.base == "mistralai/Mistral-7B-v0.1" and len(delta.shapes) == 14
    # the converted repo loads on the base it was made for (here the fixture base, named explicitly)
    model = zoo.load(tmp_path / "converted", base=str(FIXTURES / "base"))
    assert logit_error(model, logits, "logits_reconstructed_calibrated") <= 1e-5
    model.save_pretrained(tmp_path / "resaved")  # a base given at load time does not rename the delta's base
    assert BitDelta.load(tmp_path / "resaved").base == "mistralai/Mistral-7B-v0.1"
    with pytest.raises(ValueError, match="expected 224"):  # a Mistral entry checks its layer count
        from_upstream({"x/diff.pt": FIXTURES / "diff.pt"}, tmp_path / "wrong", entry)
