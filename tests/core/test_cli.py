import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from toy import ToyRegressor

import zoo
from zoo.cli import main
from zoo.registry import FileSpec, ModelEntry, register_model

ROOT = Path(__file__).resolve().parents[2]


def test_readme_model_table_is_current():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "update_readme.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_list_and_info(capsys):
    register_model(ModelEntry(name="toy-cli", method="toy",
                              files=(FileSpec("model.safetensors", "a" * 64, 2048),), metrics={"mse": 0.25},
                              description="a toy"))
    assert main(["list", "toy-c*"]) == 0
    out = capsys.readouterr().out
    assert "toy-cli" in out and "2.0 KiB" in out and "mse 0.25" in out
    assert main(["list", "--json", "--method", "toy"]) == 0
    assert "toy-cli" in json.loads(capsys.readouterr().out)
    assert main(["info", "toy-cli"]) == 0
    out = capsys.readouterr().out
    assert "a" * 64 in out and "a toy" in out
    assert main(["info", "toy-clj"]) == 2
    assert "Did you mean: toy-cli" in capsys.readouterr().err


def test_help_everywhere():
    for args in (["--help"], ["list", "--help"], ["publish", "--help"], ["train", "--help"], ["convert", "--help"]):
        out = subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True)
        assert out.returncode == 0 and "usage: zoo" in out.stdout, out.stderr
    for method in zoo.registry.methods():
        if zoo.registry.get_method(method).cli:
            out = subprocess.run([sys.executable, "-m", "zoo.cli", method, "--help"], capture_output=True, text=True)
            assert out.returncode == 0, out.stderr


def test_load_and_publish_a_folder(tmp_path, capsys):
    ToyRegressor().save_pretrained(tmp_path / "repo")
    assert main(["publish", str(tmp_path / "repo"), str(tmp_path / "copy")]) == 0
    assert "README.md" in capsys.readouterr().out
    assert main(["load", str(tmp_path / "copy"), "--dtype", "float64"]) == 0
    assert "torch.float64" in capsys.readouterr().out


def test_publish_casts_to_a_smaller_dtype(tmp_path, capsys):
    model = ToyRegressor()
    model.save_pretrained(tmp_path / "repo")
    assert main(["publish", str(tmp_path / "repo"), str(tmp_path / "half"), "--dtype", "bfloat16"]) == 0
    half = zoo.load(tmp_path / "half")
    for name, p in half.state_dict().items():
        assert p.dtype == torch.bfloat16
        torch.testing.assert_close(p, model.state_dict()[name].to(torch.bfloat16), rtol=0, atol=0)
    with pytest.raises(SystemExit, match="not a floating torch dtype"):
        main(["publish", str(tmp_path / "repo"), str(tmp_path / "bad"), "--dtype", "int8"])
    assert not (tmp_path / "bad").exists()
