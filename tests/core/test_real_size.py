"""Official checkpoints at their real size (issue 31): the generators in ``benchmarks/_official_files.py`` write
the official layouts (checked here against the official-code fixtures at the fixtures' tiny sizes), and, slow:
every full-size file converts within 1.5x its size in peak RSS, loads strictly, and the reloaded model matches
the converter's module built straight from the source file on the same random weights."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _official_files as of  # noqa: E402

FIX = ROOT / "tests" / "fixtures"


def _layout(sd: dict) -> list:
    return [(k, tuple(v.shape), v.dtype) for k, v in sd.items()]


def test_mage_and_rdm_generators_write_the_official_layout(tmp_path):
    from zoo.rcg.convert import load_official

    mage = load_official(of.write_mage(tmp_path / "mage.pth", "fixture"))
    ref = load_official(FIX / "rcg" / "mage_tiny" / "mage_ckpt.pth")
    assert sorted(mage) == sorted(ref) and mage["model_ema"] is None
    assert sorted(_layout(mage["model"])) == sorted(_layout(ref["model"]))
    assert sorted(vars(mage["args"])) == sorted(vars(ref["args"]))
    rdm = load_official(of.write_rdm(tmp_path / "rdm.pth", "fixture", key="state_dict"))
    ref = load_official(FIX / "rcg" / "rdm_tiny" / "rdm_ckpt.pth")
    assert sorted(rdm) == sorted(ref) and _layout(rdm["state_dict"]) == _layout(ref["state_dict"])  # same order too
    # the full-size files name their models as the official ones do (head counts come from these names)
    assert of._mage_args("L").model == "mage_vit_large_patch16"
    assert Path(of.RCG_SIZES["L"]["rdm_config"]).name.startswith("mocov3vitl_")


def test_orbax_generator_writes_the_official_layout(tmp_path):
    from zoo.chess.convert import read_orbax

    params = FIX / "chess" / "model_av_tiny" / "orbax" / "6400000" / "params"
    of.write_orbax_params(tmp_path / "params", "fixture")
    ours, ref = read_orbax(tmp_path / "params"), read_orbax(params)
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in ref.items()}
    assert all(v.dtype == ref[k].dtype for k, v in ours.items())
    for name in ("_METADATA", "_sharding", "array_metadatas/process_0"):
        assert json.loads((tmp_path / "params" / name).read_text()) == json.loads((params / name).read_text())
    assert (tmp_path / "params" / "commit_success.txt").read_text() == (params / "commit_success.txt").read_text()
    for size, n in of.CHESS_PARAMS.items():  # the spec's parameter counts
        assert sum(torch.Size(s).numel() for s in of.chess_layout(size).values()) == n


def test_bitdelta_generator_writes_the_official_layout(tmp_path):
    from zoo.bitdelta.convert import read_official

    tiny = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    path = of.write_bitdelta_diff(tmp_path / "diff.pt", num_layers=2, vocab=256, dtype=torch.float32, **tiny)
    assert _layout(read_official(path)) == _layout(read_official(FIX / "bitdelta" / "diff.pt"))
    # Mistral-7B (spec §8): 224 compressed projections; masks + scales + bf16 embeddings/norms/head = 1.397e9 B
    shapes = of.mistral_linear_shapes(32)
    assert len(shapes) == 224
    masks = sum(o * i // 8 + 4 for o, i in shapes.values())
    carried = 2 * (2 * 32002 * 4096 + 65 * 4096)
    assert abs(masks + carried - 1.397e9) / 1.397e9 < 2e-3


def test_escaip_generator_writes_the_official_layout(tmp_path):
    from zoo.escaip.convert import load_inference_checkpoint

    ref = load_inference_checkpoint(FIX / "escaip" / "direct_mlip_inference_checkpoint.pt")
    assert of.escaip_layout(ref.model_config) == {k: (tuple(v.shape), v.dtype) for k, v in ref.model_state_dict.items()}
    ckpt = load_inference_checkpoint(of.write_escaip_checkpoint(tmp_path / "e.pt", "tiny"))
    assert sorted(ckpt.model_config["backbone"]) == sorted(ref.model_config["backbone"])
    assert set(ckpt.ema_state_dict) == {"n_averaged"} | {f"module.{k}" for k in ckpt.model_state_dict}


# ------------------------------------------------------------------------------------------- full size (slow)
def _bench():
    import bench_real_size

    return bench_real_size


def _check(row: dict, parity_tol: float) -> None:
    # peak RSS <= 1.5x the largest source; for files under 1 GB the interpreter and imports (~0.8 GB) dominate,
    # so there the RSS the conversion adds above that baseline is held to the same bound; below 100 MB that added
    # RSS is mostly fixed costs (tensorstore, building the module: 0.2 GB for chess-9m), held to 0.5 GB instead
    source = row["largest_source_GB"]
    if source >= 1.0:
        assert row["rss_over_source"] <= 1.5, row
    if source >= 0.1:
        assert row["added_rss_over_source"] <= 1.5, row
    else:
        assert row["added_rss_over_source"] * source <= 0.5, row
    for key, value in row["parity"].items():
        assert value is True or (value is not False and value <= parity_tol), (key, row)


@pytest.mark.slow
def test_real_size_chess(tmp_path):
    rows, _ = _bench().bench_chess(tmp_path, threads=())
    for row in rows:
        _check(row, 1e-5)


@pytest.mark.slow
def test_real_size_rcg(tmp_path):
    (row,), _ = _bench().bench_rcg(tmp_path, threads=())
    assert row["converted_GB"] > 3.3
    _check(row, 1e-5)  # the same weights and code; only the encoder's BLAS path may round differently (~2e-6)


@pytest.mark.slow
def test_real_size_escaip(tmp_path):
    (row,), _ = _bench().bench_escaip(tmp_path, threads=())
    _check(row, 1e-5)


@pytest.mark.slow
def test_real_size_bitdelta(tmp_path):
    (row,), _ = _bench().bench_bitdelta(tmp_path, threads=())
    assert row["parity"]["full_size_tensors_exact"] is True
    assert row["parity"]["merged_vs_spec_reconstruction"] == 0.0
    assert row["parity"]["multitenant_vs_merged"] <= 0.05 * row["parity"]["logit_scale"]  # bf16 forward
    _check(row, float("inf"))
