"""The README's Quickstarts run as written: each code block is extracted and run in a scratch folder."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import zoo
from zoo.module import ZooModule

REPO = Path(__file__).resolve().parents[2]


def _block(heading: str, language: str) -> str:
    text = (REPO / "README.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)
    return code


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A folder outside the checkout that sees the repository's tests/ (the CLI block converts a fixture from it)."""
    (tmp_path / "tests").symlink_to(REPO / "tests")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONWARNINGS": "error::DeprecationWarning:zoo"}
    env.pop("ZOO_HUB", None)
    return tmp_path, env


def test_python_quickstart(scratch):
    folder, env = scratch
    out = subprocess.run([sys.executable, "-c", _block("Quickstart (Python)", "python")], cwd=folder, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "escaip-tiny-emt" in out.stdout
    assert (folder / "my-model" / "model.safetensors").is_file() and (folder / "my-model-repo" / "README.md").is_file()


def test_command_line_quickstart(scratch):
    folder, env = scratch
    script = "set -euo pipefail\n" + _block("Quickstart (command line)", "bash")
    out = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert (folder / "runs" / "escaip-tiny-emt" / "checkpoints" / "last.ckpt").is_file()
    # what `zoo publish` made of the fine-tune's last.ckpt is the fine-tune, not the from-scratch run
    tuned = ZooModule.from_checkpoint(folder / "runs" / "my-finetune" / "checkpoints" / "last.ckpt").state_dict()
    published = zoo.load(folder / "my-model").state_dict()
    assert tuned.keys() == published.keys() and all(torch.equal(tuned[k], published[k]) for k in tuned)
    assert "EScAIPModule (escaip), 95,776 parameters" in out.stdout
    assert (folder / "my-chess" / "config.json").is_file() and (folder / "my-model" / "README.md").is_file()


def test_every_make_target_the_readme_names_is_a_target_its_setup_section_shows():
    text = (REPO / "README.md").read_text()
    named = set(re.findall(r"`make ([\w-]+)", text))
    setup = text.split("## Set up a checkout\n", 1)[1].split("\n## ", 1)[0]
    shown = set(re.findall(r"^make ([\w-]+)", setup, flags=re.M))
    targets = set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), flags=re.M))
    assert named and named <= shown <= targets
