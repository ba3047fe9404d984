"""Helpers shared by the core's tests: comparing weights, toy models published to the loopback Hub and pinned in
the catalog, the HF cache's blobs, and loads in separate processes."""

import subprocess
import sys
from pathlib import Path

import torch
from toy import ToyRegressor

import zoo
from zoo.registry import FileSpec, ModelEntry, register_model

TESTS = Path(__file__).resolve().parents[1]


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def weight_sum(model) -> float:
    return float(sum(p.detach().double().sum() for p in model.parameters()))


def pinned_entry(name: str, published: dict, *, repo: str | None = None, pin_commit: bool = True) -> ModelEntry:
    """A toy catalog entry pinning the files (and the commit, with ``pin_commit``) that ``zoo.publish`` returned."""
    files = tuple(FileSpec(n, f["sha256"], f["size"]) for n, f in sorted(published["files"].items()))
    return ModelEntry(name=name, method="toy", repo=repo or f"user/{name}", files=files,
                      revision=published["commit"] if pin_commit else None)


def publish_pinned(name: str, model=None, *, card=None, pin_commit: bool = True):
    """``model`` (default: a new width-8 ToyRegressor) published to hf://user/NAME and registered as NAME:
    returns the model and its catalog entry."""
    model = model or ToyRegressor(width=8)
    published = zoo.publish(model, f"hf://user/{name}", card=card)
    return model, register_model(pinned_entry(name, published, pin_commit=pin_commit))


def official_toy(width: int = 8) -> tuple[ToyRegressor, bytes]:
    """A new ToyRegressor, and its weights as safetensors bytes in the stand-in official format that
    ``toy.convert_upstream`` reads."""
    from safetensors.torch import save

    model = ToyRegressor(width=width)
    return model, save({k.replace("net.", "official."): v for k, v in model.net.state_dict(prefix="net.").items()})


def official_toy_on_the_hub(hub, name: str) -> tuple[ToyRegressor, bytes]:
    """:func:`official_toy`, its file seeded in the loopback Hub's authors/official and registered as NAME, an
    entry converted from that upstream file (as the BitDelta diffs are hosted)."""
    model, data = official_toy()
    hub.seed("authors/official", {"folder/official.safetensors": data})
    register_model(ModelEntry(name=name, method="toy", converter="toy:convert_upstream", convert_args={"width": 8},
                              upstream=(FileSpec("official.safetensors", None, None,
                                                 url="hf://authors/official/folder/official.safetensors"),)))
    return model, data


def hf_blob_names(caches: Path, repo: str) -> set[str]:
    """The blobs of ``repo`` in the HF cache of the ``isolated_caches`` fixture: named by their ETag (the sha256 of an
    LFS file), with ``.incomplete`` appended while downloading."""
    folder = caches / "hf" / f"models--{repo.replace('/', '--')}" / "blobs"
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def loader_script(entry: ModelEntry) -> str:
    """Python source that registers ``entry``, loads it and prints its weight_sum."""
    return (f"import sys\nsys.path[:0] = [{str(TESTS)!r}, {str(TESTS / 'core')!r}]\nimport zoo\n"
            "from core_testdata import weight_sum\nfrom zoo.registry import FileSpec, ModelEntry, register_model\n"
            f"register_model({entry!r})\nprint(weight_sum(zoo.load({entry.name!r})))\n")


def load_in_processes(entries: list[ModelEntry]) -> list[float]:
    """Loads each entry in its own process, all at once; their weight sums."""
    procs = [subprocess.Popen([sys.executable, "-c", loader_script(e)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for e in entries]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), outs
    return [float(out) for out, _ in outs]


def installed_wheel(folder: Path) -> Path:
    """The checkout built as a wheel and installed, alone, into a new venv under ``folder``: its ``bin/`` (python,
    zoo). torch, Lightning and the rest come from this interpreter's site-packages through a plain path entry, whose
    .pth files (e.g. the editable zoo's finder) are not run, so that only the wheel provides zoo."""
    import os
    import sysconfig

    dist, venv = folder / "dist", folder / "venv"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a zoo on the path would count as installed
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                            str(TESTS.parent), "-w", str(dist)], check=True, capture_output=True, text=True)
    # e.g. "Package 'zoo._recipes.bitdelta' is absent from the `packages` configuration", once per recipe folder
    assert not [line for line in (build.stdout + build.stderr).splitlines() if "Warning:" in line]
    (wheel,) = dist.glob("lightning_zoo-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True, env=env)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "outer_site_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"
