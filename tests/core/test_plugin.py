"""docs/adding-a-method.md, proven: a fifth method shipped as a distribution of its own (tests/core/plugin, found
through its ``zoo.methods`` entry point), installed beside an installed zoo wheel, is listed, loaded, trained,
published and reloaded, with no file of the zoo changed."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import save

PLUGIN = Path(__file__).resolve().parent / "plugin"

# the weights of a LineFit as one list, for comparing across processes
FLAT = "import json, sys, torch, zoo\nflat = lambda m: torch.cat([m.net.weight.flatten(), m.net.bias]).tolist()\n"

PUBLISH = FLAT + """
from pathlib import Path
from zoo_linefit.module import LineFit
checkpoint = sys.argv[1]
published = zoo.publish(checkpoint, "hf://lightning-zoo/linefit-small")  # the catalog's default Hub home
zoo.publish(checkpoint, "linefit-folder")
print(json.dumps({"official": flat(zoo.load("linefit-official")), "published": published,
                  "reloaded": flat(LineFit.from_pretrained(Path("linefit-folder").resolve()))}))
"""

RELOAD = FLAT + """
from zoo_linefit.module import LineFit
print(json.dumps(flat(LineFit.from_pretrained("linefit-small"))))
"""


def _install_plugin(wheel_bin: Path, source: Path, target: Path) -> None:
    """``source`` built as a wheel and installed into ``target``, a folder the runs put on their path: the zoo's
    venv, shared with other tests, stays as it was."""
    dist = target.with_name(target.name + "-dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source), "-w",
                    str(dist)], check=True, capture_output=True)
    (wheel,) = dist.glob("zoo_linefit-*.whl")
    subprocess.run([str(wheel_bin / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)


def _run(wheel_bin: Path, plugin: Path, cwd: Path, command: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ZOO_HUB", "ZOO_HF_ORG")}
    done = subprocess.run([str(wheel_bin / command), *args], cwd=cwd, env={**env, "PYTHONPATH": str(plugin)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stdout


def test_a_method_of_its_own_distribution_lists_loads_trains_publishes_and_reloads(hub, wheel_bin, tmp_path):
    official = {"official.w": torch.randn(1, 4), "official.b": torch.randn(1)}
    hub.seed("authors/linefit", {"official.safetensors": save(official)})
    source = tmp_path / "source"
    shutil.copytree(PLUGIN, source)
    _install_plugin(wheel_bin, source, tmp_path / "plugin")
    run = lambda *args: _run(wheel_bin, tmp_path / "plugin", tmp_path, *args)  # noqa: E731

    assert "linefit-official" in run("zoo", "list", "linefit-*")
    run("zoo", "finetune", "linefit-official", str(source / "linefit.yaml"))  # converts the authors' file, trains
    out = json.loads(run("python", "-c", PUBLISH, str(tmp_path / "runs/linefit/checkpoints/last.ckpt")))
    assert out["official"] == torch.cat([official["official.w"].flatten(), official["official.b"]]).tolist()
    trained = out["reloaded"]
    assert trained != out["official"]

    # released: the published files pinned in the plugin's pins.json, as `zoo release` writes them
    files = [{"path": name, **spec} for name, spec in sorted(out["published"]["files"].items())]
    pins = {"linefit-small": {"files": files, "revision": out["published"]["commit"]}}
    (source / "zoo_linefit" / "pins.json").write_text(json.dumps(pins))
    _install_plugin(wheel_bin, source, tmp_path / "plugin-released")
    run = lambda *args: _run(wheel_bin, tmp_path / "plugin-released", tmp_path, *args)  # noqa: E731
    assert "linefit-small" in run("zoo", "list", "linefit-*")
    assert json.loads(run("python", "-c", RELOAD)) == trained
