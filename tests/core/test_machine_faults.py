"""Faults of the user's own machine: a full disk, read-only caches, Ctrl-C. Each ends in a result or one
``zoo: error:`` line, leaves nothing half-written, and the next try works once the fault is gone.

The disks are small tmpfs mounts and the read-only folders read-only bind mounts: these tests need root (CI runs as
root) and are skipped otherwise.
"""

import dataclasses
import errno
import gc
import hashlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from core_testdata import TESTS, official_toy, publish_pinned, same_weights
from toy import ToyRegressor

import zoo
import zoo._verify
from zoo.cli import main
from zoo.errors import DiskFullError, ReadOnlyError, StorageError
from zoo.io import LazyTensor, save_state_dict, write_text_atomic
from zoo.registry import FileSpec, ModelEntry, register_model

ESCAIP_CHECKPOINT = TESTS / "fixtures" / "escaip" / "direct_mlip_inference_checkpoint.pt"
INTERRUPTED = "zoo: interrupted (Ctrl-C); run the command again to go on"


class Mounts:
    """Mounts one test makes, each undone at its teardown."""

    def __init__(self):
        self.made: list[Path] = []

    def _mount(self, *args: str) -> None:
        done = subprocess.run(["mount", *args], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"mount {' '.join(args)} failed ({done.stderr.strip()}): no mount permission here")

    def disk(self, path: Path, size: str) -> Path:
        """A new, empty tmpfs of ``size`` (e.g. "64k") at ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        self._mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
        self.made.append(path)
        return path

    def resize(self, path: Path, size: str) -> None:
        self._mount("-o", f"remount,size={size}", str(path))

    def read_only(self, path: Path) -> Path:
        """``path`` as it is, read-only from now on."""
        self._mount("--bind", str(path), str(path))
        self.made.append(path)
        self._mount("-o", "remount,bind,ro", str(path))
        return path


@pytest.fixture
def mounts():
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs or a read-only bind mount (CI runs the suite as root)")
    made = Mounts()
    yield made
    for path in reversed(made.made):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            gc.collect()  # a loaded model may still map its weights file
            if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "--lazy", str(path)], check=True)  # detached now, gone once unused


@pytest.fixture
def say_again(monkeypatch):
    """The 'loads are slower' notice is said once per process: let this test hear it."""
    monkeypatch.setattr(zoo._verify, "_home_unwritable_said", False)


def _one_error_line(capsys) -> str:
    """The command's one error line: its last word on stderr (after any progress bars), with no traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("zoo: error: ") and "zoo: error" not in "".join(lines[:-1]) and "Traceback" not in err
    return lines[-1]


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _slower_notices(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "zoo._verify" and "slower" in r.getMessage()]


# ----------------------------------------------------------------------------- a full disk
def test_publish_that_cannot_fit_is_refused_before_writing(mounts, tmp_path, capsys):
    model = ToyRegressor(width=256)
    model.save_pretrained(tmp_path / "src")
    disk = mounts.disk(tmp_path / "disk", "256k")
    out = disk / "repo"
    assert main(["publish", str(tmp_path / "src"), str(out)]) == 2
    line = _one_error_line(capsys)
    assert f"{out}: the model needs 1.3 MiB, but its disk has 256.0 KiB free; nothing was written" in line
    assert "Free 1.0 MiB or more there" in line
    assert _files(disk) == []  # not even the folder
    mounts.resize(disk, "4m")
    assert main(["publish", str(tmp_path / "src"), str(out)]) == 0
    assert same_weights(model, zoo.load(out))


def test_disk_filling_up_during_a_write_leaves_nothing(mounts, tmp_path):
    disk = mounts.disk(tmp_path / "disk", "64k")
    target = disk / "new" / "folders" / "notes.txt"
    with pytest.raises(DiskFullError) as caught:
        write_text_atomic(target, "x" * (1 << 20))
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ENOSPC and caught.value.path == target
    assert str(caught.value).startswith(f"{target}: the disk is full (No space left on device): free space there")
    assert _files(disk) == []  # no temporary file, and no folder made for it

    # a repo that fits when its write starts, until another writer fills the disk between two shards
    mounts.resize(disk, "2500k")
    filler = disk / "someone-else's.bin"

    def fill_the_disk():
        with open(filler, "wb", buffering=0) as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * (64 << 10))
        return torch.ones(128, 256)

    tensors = {"a": torch.zeros(128, 256), "b": LazyTensor(torch.float32, (128, 256), fill_the_disk)}
    with pytest.raises(DiskFullError):
        save_state_dict(tensors, disk / "repo", max_shard_bytes=128 * 256 * 4)
    assert _files(disk) == [filler.name]  # the first shard went with the folder made for it
    filler.unlink()
    tensors["b"] = torch.ones(128, 256)
    assert save_state_dict(tensors, disk / "repo", max_shard_bytes=128 * 256 * 4)[-1] == "model.safetensors.index.json"


def test_convert_onto_a_full_disk(mounts, tmp_path, capsys):
    disk = mounts.disk(tmp_path / "disk", "512k")
    args = ["convert", "escaip", str(ESCAIP_CHECKPOINT), "--out", str(disk / "escaip")]
    assert main(args) == 2
    assert "the model needs" in _one_error_line(capsys)
    assert _files(disk) == []
    mounts.resize(disk, "4m")
    assert main(args) == 0
    assert zoo.load(disk / "escaip").model_type == "escaip"


def test_make_data_onto_a_full_disk(mounts, tmp_path, capsys):
    disk = mounts.disk(tmp_path / "disk", "16k")
    out = disk / "data"
    args = ["escaip", "make-data", str(out), "--molecules", "--slabs", "cu111_o", "--temperatures", "300",
            "--seeds", "1", "--slab-frames", "4", "--stride", "2", "--segment-frames", "4"]
    assert main(args) == 2
    line = _one_error_line(capsys)
    assert "seg_00000.extxyz: the disk is full" in line
    assert _files(out) == ["manifest.json"]  # no partial segment, no empty trajectory folder
    mounts.resize(disk, "1m")
    assert main(args) == 0
    assert "4 / 4 frames" in capsys.readouterr().out
    assert [p.name for p in out.rglob("*.extxyz")] == ["seg_00000.extxyz"]


def test_chess_bag_onto_a_full_disk_leaves_nothing(mounts, tmp_path):
    from zoo.chess.bag import BagReader, BagWriter

    disk = mounts.disk(tmp_path / "disk", "16k")
    bag = disk / "data" / "action_value_data.bag"
    too_many = [b"x" * 1024] * 64
    index_too_big = [b"x"] * 4096  # the records fit (4 KiB), their index (32 KiB) does not
    for records in (too_many, index_too_big):
        with pytest.raises(DiskFullError, match=f"^{bag}: the disk is full"), BagWriter(bag) as writer:
            writer.write_all(records)
        assert _files(disk) == []  # no temporary bag, no folder made for it
    mounts.resize(disk, "1m")
    with BagWriter(bag) as writer:
        writer.write_all(records)
    assert list(BagReader(bag)) == records and _files(disk) == ["data", "data/action_value_data.bag"]


def test_download_that_cannot_fit_is_refused_before_its_first_byte(hub, mounts, tmp_path, monkeypatch, capsys):
    model, _ = publish_pinned("toy-roomless", ToyRegressor(width=256))
    cache = mounts.disk(tmp_path / "hf", "128k")
    monkeypatch.setenv("ZOO_HF_CACHE", str(cache))
    hub.reset_requests()
    assert main(["download", "toy-roomless"]) == 2
    line = _one_error_line(capsys)
    assert f"{cache}: downloading toy-roomless needs 264.4 KiB, but its disk has 128.0 KiB free" in line
    assert "or set ZOO_HF_CACHE to a folder on a disk with room" in line
    assert hub.count("GET", "/resolve/") == 0
    mounts.resize(cache, "4m")
    assert same_weights(model, zoo.load("toy-roomless"))


@pytest.mark.parametrize("inodes", [5, 9, 13, 15])  # the lock folder, a small blob, a symlink, the weights' blob
def test_disk_filling_up_during_a_download(hub, mounts, tmp_path, monkeypatch, inodes):
    """The disk runs out of room for new files (its inodes) while the HF cache fills: one error, and the next
    load works."""
    model, _ = publish_pinned(f"toy-inodes-{inodes}", ToyRegressor(width=256))
    cache = mounts.disk(tmp_path / "hf", f"4m,nr_inodes={inodes}")
    monkeypatch.setenv("ZOO_HF_CACHE", str(cache))
    with pytest.raises(DiskFullError, match="the disk is full .* or set ZOO_HF_CACHE to a folder on a disk with room"):
        zoo.load(f"toy-inodes-{inodes}")
    mounts.resize(cache, "4m,nr_inodes=1000")
    assert same_weights(model, zoo.load(f"toy-inodes-{inodes}"))


def test_upstream_download_and_conversion_that_cannot_fit(file_server, mounts, tmp_path, monkeypatch):
    """An entry converted from its official files on first load: the download, then the conversion, are each
    refused before their first byte while ZOO_HOME's disk cannot hold them; the download is not repeated."""
    model, data = official_toy(width=256)
    file_server.files["/official.safetensors"] = data
    register_model(ModelEntry(name="toy-upstream-full", method="toy", converter="toy:convert_upstream",
                              convert_args={"width": 256}, upstream=(FileSpec(
                                  "official.safetensors", hashlib.sha256(data).hexdigest(), len(data),
                                  url=f"{file_server.url}/official.safetensors"),)))
    home = mounts.disk(tmp_path / "home", "128k")
    monkeypatch.setenv("ZOO_HOME", str(home))
    fix = "or set ZOO_HOME to a folder on a disk with room"
    with pytest.raises(DiskFullError, match=f"downloading official.safetensors needs 263.5 KiB.* {fix}"):
        zoo.load("toy-upstream-full")
    assert file_server.hits == []
    mounts.resize(home, "1m")
    with pytest.raises(DiskFullError, match=f"the model needs 1.3 MiB.* {fix}"):
        zoo.load("toy-upstream-full")
    assert not (home / "converted").exists()  # no partial conversion, no folder made for it
    mounts.resize(home, "4m")
    assert same_weights(model, zoo.load("toy-upstream-full"))
    assert file_server.hits == ["/official.safetensors"]


# ----------------------------------------------------------------------------- read-only caches
def test_embedded_model_loads_with_a_read_only_zoo_home(mounts, tmp_path, monkeypatch, caplog, say_again):
    monkeypatch.setenv("ZOO_HOME", str(mounts.read_only(tmp_path) / "zoo"))
    with caplog.at_level(logging.WARNING, logger="zoo._verify"):
        for _ in range(2):
            assert zoo.load("escaip-tiny-emt").model_type == "escaip"
    assert len(_slower_notices(caplog)) == 1  # said once, not on every load or file
    assert f"cannot write to ZOO_HOME {tmp_path / 'zoo'} (Read-only file system)" in _slower_notices(caplog)[0]
    assert not (tmp_path / "zoo").exists()


@pytest.mark.parametrize("home", ["filled", "never used"])
def test_read_only_filled_caches_load_offline(hub, mounts, isolated_caches, monkeypatch, caplog, say_again, home):
    """The shared cluster cache: an HF cache filled elsewhere, read-only here, with HF_HUB_OFFLINE=1; ZOO_HOME
    read-only too, with its locks and verified-file marks (or none: every file is hashed)."""
    name = f"toy-shared-cache-{home.replace(' ', '-')}"
    model, _ = publish_pinned(name)
    zoo.download(name)
    if home == "never used":
        monkeypatch.setenv("ZOO_HOME", str(isolated_caches / "unused-home"))
    mounts.read_only(isolated_caches)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.reset_requests()
    with caplog.at_level(logging.WARNING, logger="zoo._verify"):
        assert same_weights(model, zoo.load(name))
    assert hub.count() == 0 and len(_slower_notices(caplog)) == 1


def test_a_download_into_a_read_only_cache_names_the_fixes(hub, mounts, isolated_caches, capsys):
    publish_pinned("toy-read-only")
    mounts.read_only(isolated_caches)
    assert main(["download", "toy-read-only"]) == 2
    line = _one_error_line(capsys)
    assert "(Read-only file system): set ZOO_HF_CACHE to a writable folder, or, if this cache already holds the " \
           "model, run with HF_HUB_OFFLINE=1" in line
    with pytest.raises(ReadOnlyError) as caught:
        zoo.download("toy-read-only")
    assert isinstance(caught.value, StorageError) and caught.value.errno == errno.EROFS


# ----------------------------------------------------------------------------- Ctrl-C
def _default_ctrl_c() -> None:
    """In the child, before Python starts: Ctrl-C's default action. A shell that runs the suite as a background
    job ignores SIGINT, children inherit that, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _zoo_process(*args: str, before: str = "") -> subprocess.Popen:
    """``zoo ARGS`` in a new process, after the Python statements ``before``."""
    script = (f"import sys\nsys.path[:0] = [{str(TESTS)!r}, {str(TESTS / 'core')!r}]\n{before}\n"
              f"from zoo.cli import main\nsys.exit(main({list(args)!r}))\n")
    return subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_ctrl_c)


def _interrupt(proc: subprocess.Popen) -> list[str]:
    """Ctrl-C ``proc``: its exit status is 130 and it says one line, no traceback. Its stderr's lines."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and lines[-1] == INTERRUPTED and "Traceback" not in err, err
    return lines


def test_ctrl_c_during_a_slow_download(hub, isolated_caches):
    model, entry = publish_pinned("toy-ctrl-c", ToyRegressor(width=256))
    hub.stall("model.safetensors", after=4096, seconds=30, repo_id="user/toy-ctrl-c", times=1)
    hub.reset_requests()
    proc = _zoo_process("download", "toy-ctrl-c", before=f"from zoo.registry import *\nregister_model({entry!r})")
    deadline = time.monotonic() + 120
    while hub.count("GET", "model.safetensors") == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # the client is inside the stalled transfer
    _interrupt(proc)
    assert same_weights(model, zoo.load("toy-ctrl-c"))


def test_ctrl_c_during_a_conversion(tmp_path):
    """The conversion is held while it writes the weights (a slow disk), and interrupted there."""
    out = tmp_path / "escaip"
    slow_disk = ("import time, zoo.io\n"
                 "def slow(t):\n    print('writing', flush=True)\n    time.sleep(60)\n"
                 "zoo.io.release_pages = slow")
    proc = _zoo_process("convert", "escaip", str(ESCAIP_CHECKPOINT), "--out", str(out), before=slow_disk)
    assert proc.stdout.readline() == "writing\n"
    assert list(out.glob(".model.safetensors.*.tmp"))  # interrupted mid-file
    _interrupt(proc)
    assert not out.exists()
    assert main(["convert", "escaip", str(ESCAIP_CHECKPOINT), "--out", str(out)]) == 0
    assert zoo.load(out).model_type == "escaip"


@pytest.mark.parametrize("writer", ["save_pretrained", "publish", "convert chess", "convert bitdelta"])
def test_ctrl_c_between_the_weights_and_the_config_leaves_no_folder(writer, tmp_path, monkeypatch):
    """Interrupted once the weights are written, before config.json is: the new folder goes with them (a folder of
    weights and no config would not load, and would block the next try)."""
    import zoo.io

    def ctrl_c_at_the_config(path, obj):
        assert list(Path(path).parent.glob("*.safetensors")), "the weights come first"
        raise KeyboardInterrupt

    out = tmp_path / "new" / "repo"
    ToyRegressor().save_pretrained(tmp_path / "toy")
    commands = {"publish": ["publish", str(tmp_path / "toy"), str(out)],
                "convert chess": ["convert", "chess", str(TESTS / "fixtures" / "chess" / "model_av_tiny" / "params.npz"),
                                  "--out", str(out), "--num-heads", "4", "--policy", "action_value"],
                "convert bitdelta": ["convert", "bitdelta", str(TESTS / "fixtures" / "bitdelta" / "diff.pt"), "--out",
                                     str(out), "--base", "base"]}
    monkeypatch.setattr(zoo.io, "write_json_atomic", ctrl_c_at_the_config)  # every repo writer's (zoo.io.write_repo)
    if writer == "save_pretrained":
        with pytest.raises(KeyboardInterrupt):
            ToyRegressor().save_pretrained(out)
    else:
        assert main(commands[writer]) == 130
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()
    if writer == "save_pretrained":
        ToyRegressor().save_pretrained(out)
    else:
        assert main(commands[writer]) == 0
    base = {"base": str(TESTS / "fixtures" / "bitdelta" / "base")} if writer == "convert bitdelta" else {}
    assert zoo.load(out, **base) is not None
