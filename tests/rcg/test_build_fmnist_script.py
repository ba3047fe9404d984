"""recipes/rcg/build_fmnist.sh eval: each SETTINGS name becomes the right `zoo rcg eval` / `sample` command (run
against a `zoo` stand-in that records its arguments), and a bad name stops it before any work."""

import os
import stat
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "recipes" / "rcg" / "build_fmnist.sh"


def _run_eval(tmp_path: Path, settings: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    bin_dir, log = tmp_path / "bin", tmp_path / "zoo-calls.txt"
    bin_dir.mkdir()
    recorder = bin_dir / "zoo"  # one line per call: its arguments, tab-separated
    recorder.write_text(f'#!/usr/bin/env bash\n(IFS=$\'\\t\'; echo "$*") >> "{log}"\n')
    recorder.chmod(recorder.stat().st_mode | stat.S_IEXEC)
    run = tmp_path / "runs" / "rcg"
    for done in ("pipeline/config.json", "eval/fmnist_test_ref.npz", "eval/tokenizer-2000.json"):
        (run / done).parent.mkdir(parents=True, exist_ok=True)
        (run / done).write_text("{}")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RUN": str(run), "SETTINGS": settings,
           "N": "2000"}
    result = subprocess.run(["bash", str(SCRIPT), "eval"], env=env, capture_output=True, text=True, cwd=tmp_path)
    calls = [line.split("\t") for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def _option(call: list[str], name: str) -> str:
    return call[call.index(name) + 1]


def test_each_setting_evaluates_its_generator_with_its_sampling_options(tmp_path):
    result, calls = _run_eval(tmp_path, "baseline-t6 rcg-cfg3-t4.5")
    assert result.returncode == 0, result.stderr
    assert [c[:2] for c in calls] == [["rcg", "eval"], ["rcg", "sample"]] * 2
    run = tmp_path / "runs" / "rcg"
    baseline_eval, _, rcg_eval, rcg_grid = calls
    assert baseline_eval[2] == f"{run}/mage_baseline/repo" and "--cfg" not in baseline_eval
    assert _option(baseline_eval, "--temperature") == "6"
    assert _option(baseline_eval, "--out") == f"{run}/eval/baseline-t6-2000.json"
    assert _option(baseline_eval, "--cache-dir") == f"{run}/eval/cache-baseline-t6"
    for call in (rcg_eval, rcg_grid):
        assert call[2] == f"{run}/pipeline"
        assert (_option(call, "--cfg"), _option(call, "--temperature")) == ("3", "4.5")
    assert _option(rcg_grid, "--out") == f"{run}/eval/rcg-cfg3-t4.5.png"


def test_an_unknown_setting_stops_before_any_work(tmp_path):
    result, calls = _run_eval(tmp_path, "baseline-t6 rcg-t4")
    assert result.returncode == 2
    assert "unknown sampler 'rcg-t4'" in result.stderr and "rcg-cfgC-tT" in result.stderr
    assert calls == []
