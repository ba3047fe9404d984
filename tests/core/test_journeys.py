"""The journeys of docs/journeys.md run as written from an installed wheel in a fresh venv: each section's bash
blocks, in a scratch folder outside the checkout, with the checkout's hub/ as the mirror (``ZOO_HUB``)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from core_testdata import installed_wheel

REPO = Path(__file__).resolve().parents[2]


def _blocks(heading: str) -> list[str]:
    text = (REPO / "docs" / "journeys.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


@pytest.fixture(scope="module")
def wheel_bin(tmp_path_factory):
    return installed_wheel(tmp_path_factory.mktemp("journeys-wheel"))


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
