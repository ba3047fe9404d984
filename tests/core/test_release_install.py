"""`zoo release` end to end against the loopback Hub, and an installed wheel (no checkout) loading every embedded
model from its Hub home with weights identical to the checkout's."""

import hashlib
import inspect
import json
import os
import subprocess
import textwrap
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import zoo
from zoo.cli import main
from zoo.registry import FileSpec, get_entry, hub_org, register_model
from zoo.release import release

REPO = Path(__file__).resolve().parents[2]
HUB = REPO / "hub"
EMBEDDED = sorted(p.name for p in HUB.iterdir() if p.is_dir())
CHESS_FIXTURES = REPO / "tests" / "fixtures" / "chess"


def weights_digest(model) -> str:
    h = hashlib.sha256()
    for key, t in sorted(model.state_dict().items()):
        h.update(key.encode())
        h.update(str(t.dtype).encode())
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def test_dry_run_lists_every_entry_with_its_hub_home_and_pins(capsys):
    assert main(["release", "--dry-run"]) == 0
    out = capsys.readouterr().out
    for name in zoo.list_models():
        entry = get_entry(name)
        assert f"{name}  ->  hf://{entry.hub_repo}@{entry.revision or 'main'}" in out
        for f in entry.files:
            assert f.sha256 in out
    for name in [*EMBEDDED, "chess-270m", "rcg-imagenet256", "bitdelta-mistral-7b-openorca"]:
        assert get_entry(name).hub_repo == f"lightning-zoo/{name}"  # the documented default org
    assert out.count("action: upload the embedded mirror") == len(EMBEDDED)
    assert "action: skip: official files not on this machine (`zoo download chess-270m`" in out


def _tiny_chess_upstream():
    """A catalog-style upstream entry whose official file (an Orbax zip) is already in the downloads folder."""
    pytest.importorskip("tensorstore")
    name = "chess-test-release-tiny"
    archive = Path(os.environ["ZOO_HOME"]) / "downloads" / name / "tiny.zip"
    archive.parent.mkdir(parents=True)
    root = CHESS_FIXTURES / "model_av_tiny" / "orbax"
    with zipfile.ZipFile(archive, "w") as z:
        for path in root.rglob("*"):
            if path.is_file():
                z.write(path, "tiny/" + str(path.relative_to(root)))
    base = get_entry("chess-9m")
    return register_model(replace(base, name=name, upstream=(FileSpec("tiny.zip", None, None, "https://example.invalid/tiny.zip"),),
                                  convert_args={**base.convert_args, "num_heads": 4, "num_params": 102_816}))


def test_release_publishes_every_entry_and_reloads_identically(hub, tmp_path, monkeypatch):
    upstream = _tiny_chess_upstream()
    names = [*EMBEDDED, upstream.name]
    pins_out = tmp_path / "pins.json"
    result = release(names, pins_out=pins_out, progress=lambda line: None)
    assert sorted(result["released"]) == sorted(names) and result["skipped"] == {}
    written = json.loads(pins_out.read_text())
    for name in EMBEDDED:  # the mirror went up unchanged: the catalog's pins hold, now with a commit
        pinned = {(f.path, f.sha256, f.size) for f in get_entry(name).files}
        assert {(f["path"], f["sha256"], f["size"]) for f in written[name]["files"]} == pinned
        assert written[name]["revision"] == hub.head(f"{hub_org()}/{name}")
    converted = written[upstream.name]
    assert "README.md" in {f["path"] for f in converted["files"]}  # converted repos get a card

    monkeypatch.setenv("ZOO_HUB", str(tmp_path / "no-mirror"))  # as an installed zoo: the Hub only
    for name in EMBEDDED:
        assert zoo.hub.where(get_entry(name)) == "hub"
        assert weights_digest(zoo.load(name)) == weights_digest(zoo.load(HUB / name)), name
    released = register_model(replace(upstream, name="chess-test-release-pinned", repo=upstream.hub_repo,
                                      revision=converted["revision"],
                                      files=tuple(FileSpec(f["path"], f["sha256"], f["size"]) for f in converted["files"])))
    hub.reset_requests()
    assert weights_digest(zoo.load(released.name)) == weights_digest(zoo.load(upstream.name))
    assert hub.count("GET", f"{upstream.hub_repo}/resolve") >= 1  # the released one came from the Hub


INSTALLED = inspect.getsource(weights_digest) + textwrap.dedent("""
    import hashlib, json, sys
    import torch, zoo
    from zoo.hub import embedded_hub_dir
    from zoo.card import TEMPLATE_PATH

    assert "site-packages" in zoo.__file__, zoo.__file__
    assert not embedded_hub_dir().exists() and TEMPLATE_PATH.is_file()
    print(json.dumps({name: weights_digest(zoo.load(name)) for name in sys.argv[1:]}))
""")


def _checkout_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_installed_wheel_loads_the_embedded_models_from_the_hub(hub, wheel_bin, tmp_path):
    # packages found and data by glob (setup.py, pyproject.toml): every method's files and pins.json, every recipe
    (wheel,) = (wheel_bin.parent.parent / "dist").glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"zoo/{f}" for f in _checkout_files(REPO / "zoo")}
    wanted |= {f"zoo/_recipes/{f}" for f in _checkout_files(REPO / "recipes")}
    assert not wanted - shipped
    for name in EMBEDDED:  # the zoo's Hub homes, as `zoo release` leaves them
        hub.seed(f"{hub_org()}/{name}", {p.name: p.read_bytes() for p in (HUB / name).iterdir()})

    env = {k: v for k, v in os.environ.items() if k not in ("ZOO_HUB", "PYTHONPATH")}
    work = tmp_path / "elsewhere"
    work.mkdir()
    out = subprocess.run([str(wheel_bin / "python"), "-c", INSTALLED, *EMBEDDED], cwd=work, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    digests = json.loads(out.stdout.strip().splitlines()[-1])
    for name in EMBEDDED:
        assert digests[name] == weights_digest(zoo.load(HUB / name)), name

    cli = subprocess.run([str(wheel_bin / "zoo"), "recipe", "chess/small_cpu"], cwd=work, env=env,
                         capture_output=True, text=True)
    assert cli.returncode == 0 and "chess-small-av" in cli.stdout
    listing = subprocess.run([str(wheel_bin / "zoo"), "list", "escaip-*"], cwd=work, env=env, capture_output=True,
                             text=True).stdout
    assert "escaip-tiny-emt" in listing and " hub " in listing and "embedded" not in listing
