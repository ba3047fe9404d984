"""`zoo convert bitdelta --base-path` loads the base in the diff's own dtype and never rounds the diff silently
(issue 28: the old bfloat16 default turned the fp32 official diff into a bf16 delta, logits off by 1.75e-2)."""

import pytest
import torch
from bitdelta_testdata import FIXTURES, logit_error

import zoo
from zoo.bitdelta.convert import carried_dtype, convert
from zoo.bitdelta.delta import BitDelta
from zoo.io import weights_fingerprint
from zoo.cli import main


def test_cli_with_the_base_converts_the_fp32_diff_exactly(tmp_path, logits, models, capsys):
    out = tmp_path / "delta"
    assert main(["convert", "bitdelta", str(FIXTURES / "diff.pt"), "--out", str(out), "--base", "base",
                 "--base-path", str(FIXTURES / "base")]) == 0
    delta = BitDelta.load(out)
    assert delta.base_dtype == "float32" and delta.base_sha256 == weights_fingerprint(models["base"])
    assert logit_error(zoo.load(out, base=str(FIXTURES / "base")), logits, "logits_reconstructed_calibrated") <= 1e-5


def test_a_base_dtype_that_would_round_the_diff_is_refused(tmp_path, capsys):
    assert main(["convert", "bitdelta", str(FIXTURES / "diff.pt"), "--out", str(tmp_path / "bf16"), "--base", "base",
                 "--base-path", str(FIXTURES / "base"), "--base-dtype", "bfloat16"]) != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # (transformers' load bar)
    assert len(errors) == 1 and errors[0].startswith("zoo: error:") and "--base-dtype float32" in errors[0]
    assert not (tmp_path / "bf16" / "config.json").exists()


def test_bf16_diff_loads_its_base_in_bf16_and_an_fp32_base_is_exact(tmp_path, official):
    assert carried_dtype(official["diff_untrained_bf16"]) == torch.bfloat16
    assert carried_dtype(official["diff"]) == torch.float32
    delta = convert(FIXTURES / "diff_untrained_bf16.pt", tmp_path / "bf16", base="base", base_model=FIXTURES / "base")
    assert delta.base_dtype == "bfloat16"
    wide = convert(FIXTURES / "diff_untrained_bf16.pt", tmp_path / "wide", base="base", base_model=FIXTURES / "base",
                   base_dtype="float32")  # bf16 tensors are exact in fp32: widening is allowed
    assert wide.base_dtype == "float32"
    mixed = dict(official["diff"], **{"model.norm.weight": official["diff"]["model.norm.weight"].bfloat16()})
    with pytest.raises(ValueError, match="mix"):
        carried_dtype(mixed)
