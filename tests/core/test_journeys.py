"""The journeys of docs/journeys.md run as written from an installed wheel in a fresh venv: each section's bash
blocks, in a scratch folder outside the checkout, with the checkout's hub/ as the mirror (``ZOO_HUB``)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _blocks(heading: str) -> list[str]:
    text = (REPO / "docs" / "journeys.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


def _run(wheel_bin: Path, folder: Path, heading: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PATH=f"{wheel_bin}{os.pathsep}{env['PATH']}", ZOO_HUB=str(REPO / "hub"), OMP_NUM_THREADS="1",
               PYTHONWARNINGS="error::DeprecationWarning:zoo")
    out = ""
    for block in _blocks(heading):
        done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=900)
        out += done.stdout + done.stderr
        assert done.returncode == 0, f"{heading}:\n{block}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        assert "Traceback" not in done.stderr, done.stderr[-5000:]
    return out


def test_escaip_molecules_finetune_publish_md(wheel_bin, tmp_path):
    out = _run(wheel_bin, tmp_path, "EScAIP: your molecules, a fine-tuned potential, molecular dynamics")
    assert (tmp_path / "my-escaip" / "model.safetensors").is_file()
    moved = float(re.search(r"total energy moved ([-+\d.]+) meV", out).group(1))
    assert abs(moved) < 50  # NVE from a fine-tuned potential conserves energy


def test_chess_data_train_publish_eval_uci_multipv(wheel_bin, tmp_path):
    if not shutil.which("stockfish", path="/usr/games"):
        pytest.skip("needs Debian's stockfish (/usr/games/stockfish)")
    out = _run(wheel_bin, tmp_path, "Chess: data from Stockfish, a model, its strength, a UCI engine")
    lines = re.findall(r"^multipv (\d) (\S+) ", out, flags=re.M)
    assert [k for k, _ in lines] == ["1", "2", "3"] and len({move for _, move in lines}) == 3
    assert re.search(r"^plays \S+$", out, flags=re.M)


def test_rcg_sample_finetune_publish_sample(wheel_bin, tmp_path):
    if not Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("needs Debian's dataset-fashion-mnist")
    _run(wheel_bin, tmp_path, "RCG: sample, fine-tune the generator on your images, sample again")
    assert (tmp_path / "before.png").is_file() and (tmp_path / "after.png").is_file()
    config = (tmp_path / "my-rcg" / "config.json").read_text()
    assert '"rcg-pipeline"' in config


def test_bitdelta_finetune_compress_distill_publish_serve(wheel_bin, tmp_path):
    out = _run(wheel_bin, tmp_path, "BitDelta: fine-tune, compress to one bit, distil, serve many fine-tunes at once")
    assert (tmp_path / "my-delta-repo" / "README.md").is_file()
    assert "my-delta-repo" in out and "llama-bytes-3m-austen-bitdelta" in out
