"""Faults on the Hub path, against the loopback Hub: each gives a clean load or one clear error, the next load
works, and no altered byte ever reaches a model."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from core_testdata import (hf_blob_names, load_in_processes, loader_script, official_toy_on_the_hub, pinned_entry,
                           publish_pinned, same_weights, weight_sum)
from toy import ToyRegressor

import zoo
from zoo.cli import main
from zoo.errors import HubError, IntegrityError, OfflineError, RepoChangedError


@pytest.fixture
def hub(hub, monkeypatch):
    """conftest's loopback Hub, without the client's retry pauses."""
    monkeypatch.setattr("time.sleep", lambda s: None)
    return hub


def _weights_offset(hub, repo):
    """An offset inside the tensor data of model.safetensors (past its JSON header)."""
    data = hub.file_bytes(repo, "model.safetensors")
    header = int.from_bytes(data[:8], "little")
    return 8 + header + (len(data) - 8 - header) // 2


def test_one_byte_flip_in_tensor_data_is_retried_then_reported(hub, isolated_caches):
    model, _ = publish_pinned("toy-flip")
    offset = _weights_offset(hub, "user/toy-flip")
    hub.flip("model.safetensors", offset=offset, repo_id="user/toy-flip", times=1)
    assert same_weights(model, zoo.load("toy-flip"))  # one bad transfer: fetched again, clean load
    assert hub.count("GET", "/resolve/") >= 2

    _, entry = publish_pinned("toy-flip2")
    hub.flip("model.safetensors", offset=_weights_offset(hub, "user/toy-flip2"), repo_id="user/toy-flip2")
    with pytest.raises(IntegrityError, match="twice in a row"):
        zoo.load("toy-flip2")
    weights = next(f.sha256 for f in entry.files if f.path == "model.safetensors")
    assert weights not in hf_blob_names(isolated_caches, "user/toy-flip2")  # the blob the Hub named is not kept
    hub.clear_faults()
    zoo.load("toy-flip2")  # the next load works


def test_truncated_cache_blob_is_fetched_again(hub, isolated_caches):
    model, _ = publish_pinned("toy-cache")
    blob = Path(os.path.realpath(zoo.download("toy-cache") / "model.safetensors"))
    blob.write_bytes(blob.read_bytes()[:100])  # a cache copy cut short (disk full, killed copy, ...)
    hub.reset_requests()
    assert same_weights(model, zoo.load("toy-cache"))
    assert hub.count("GET", "model.safetensors") == 1


def test_server_without_hashes(hub):
    """A mirror that sends no hashes in model_info: catalog pins still verify, hf:// asks paths-info; a server
    with no hashes anywhere cannot be verified and says so."""
    model, _ = publish_pinned("toy-nohash", pin_commit=False)
    hub.hide_hashes = "info"
    assert same_weights(model, zoo.load("toy-nohash"))
    assert same_weights(model, zoo.load("hf://user/toy-nohash"))
    assert hub.count("POST", "paths-info") >= 1
    hub.hide_hashes = "all"
    publish_pinned("toy-nohash2")
    with pytest.raises(IntegrityError, match="sends no sha256 or git blob id"):
        zoo.load("hf://user/toy-nohash2")


def test_tampered_file_with_no_hashes_never_loads(hub, isolated_caches):
    publish_pinned("toy-nh-flip", pin_commit=False)
    hub.hide_hashes = "info"
    hub.flip("model.safetensors", offset=_weights_offset(hub, "user/toy-nh-flip"), repo_id="user/toy-nh-flip")
    with pytest.raises(IntegrityError):
        zoo.load("hf://user/toy-nh-flip")
    with pytest.raises(IntegrityError):
        zoo.load("toy-nh-flip")
    hub.clear_faults()
    zoo.load("hf://user/toy-nh-flip")
    zoo.load("toy-nh-flip")


def test_repo_changed_since_release(hub):
    publish_pinned("toy-moved", pin_commit=False)
    zoo.publish(ToyRegressor(width=8), "hf://user/toy-moved")  # main moves on: other weights
    with pytest.raises(RepoChangedError, match="changed since this zoo release"):
        zoo.load("toy-moved")


def test_kill_9_mid_download_then_reload(hub, isolated_caches):
    model, entry = publish_pinned("toy-kill", ToyRegressor(width=256))
    hub.stall("model.safetensors", after=4096, seconds=30, repo_id="user/toy-kill", times=1)
    hub.reset_requests()
    proc = subprocess.Popen([sys.executable, "-c", loader_script(entry)], env=os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while hub.count("GET", "model.safetensors") == 0 and time.monotonic() < deadline:
        threading.Event().wait(0.2)  # time.sleep is patched out by the fixture
    threading.Event().wait(1.0)  # let the client write the first bytes of its partial file
    assert hub.count("GET", "model.safetensors") >= 1
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert same_weights(model, zoo.load("toy-kill"))  # the same cache, lock and partial file: loads cleanly
    assert same_weights(model, zoo.load("toy-kill"))


def test_four_processes_load_one_uncached_model(hub):
    model, entry = publish_pinned("toy-four")
    hub.delay(0.2, path_contains="/resolve/")  # make the first loads overlap
    assert load_in_processes([entry] * 4) == pytest.approx([weight_sum(model)] * 4)
    assert hub.count("GET", "toy-four/resolve") == 3  # README, config, weights: fetched once between the four


def test_two_models_of_one_repo_load_at_once(hub):
    first, entry = publish_pinned("toy-shared")
    second = ToyRegressor(width=8)
    other = pinned_entry("toy-shared-2", zoo.publish(second, "hf://user/toy-shared"), repo=entry.repo)
    hub.delay(0.2, path_contains="/resolve/")
    assert load_in_processes([entry, other]) == pytest.approx([weight_sum(first), weight_sum(second)])


def test_network_down_serves_main_from_the_cache(hub, monkeypatch):
    model, _ = publish_pinned("toy-down", pin_commit=False)
    assert same_weights(model, zoo.load("hf://user/toy-down@main"))
    assert same_weights(model, zoo.load("toy-down"))
    monkeypatch.setenv("ZOO_HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there; HF_HUB_OFFLINE unset
    assert same_weights(model, zoo.load("hf://user/toy-down@main"))
    assert same_weights(model, zoo.load("hf://user/toy-down"))
    assert same_weights(model, zoo.load("toy-down"))
    with pytest.raises(OfflineError, match="never downloaded here"):
        zoo.load("hf://user/never-seen")


def test_repo_of_pickles_only(hub):
    hub.seed("user/pickles", {"config.json": b'{"model_type": "toy-mlp", "hparams": {}}',
                              "pytorch_model.bin": b"\x80\x04K\x01." * 100})
    with pytest.raises(HubError, match=r"holds only pickle files \(pytorch_model.bin\).*never unpickles"):
        zoo.load("hf://user/pickles")


def test_every_non_pickle_file_is_kept(hub):
    publish_pinned("toy-extras")
    hub.seed("user/toy-extras", {"tokenizer.model": b"\x00\x01tok" * 50, "stats.npz": b"PK\x03\x04" + b"\x00" * 64,
                                 "weights.pt": b"\x80\x04K\x01."})
    folder = zoo.download("hf://user/toy-extras")
    assert {"tokenizer.model", "stats.npz", "model.safetensors", "config.json"} <= {p.name for p in folder.iterdir()}
    assert not (folder / "weights.pt").exists()


@pytest.mark.parametrize("uri, message", [
    ("hf://user/missing", "Hub repo user/missing not found"),
    ("hf://user/toy-err@nope", "revision 'nope' does not exist in Hub repo user/toy-err"),
])
def test_hub_errors_are_one_line(hub, capsys, uri, message):
    torch.manual_seed(0)  # the same weights for both cases: registering toy-err again is then a no-op
    publish_pinned("toy-err", pin_commit=False)
    capsys.readouterr()
    assert main(["download", uri]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo: error: ") and message in err and err.count("\n") == 1


def test_private_repo_and_server_errors_are_one_line(hub, capsys, monkeypatch):
    hub.create_repo("user/secret", private=True)
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    assert main(["download", "hf://user/secret"]) == 2
    err = capsys.readouterr().err
    assert "HF_TOKEN" in err and err.count("\n") == 1
    monkeypatch.setenv("HF_TOKEN", "dummy")
    hub.fail(503, path_contains="/api/models/user/secret", times=None)
    assert main(["download", "hf://user/secret"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo: error: ") and "503" in err and err.count("\n") == 1


def test_official_file_on_the_hub_goes_through_the_hf_cache(hub, isolated_caches):
    """An upstream file hosted on the Hub (as the BitDelta diffs are): hf_hub_download into the HF cache, checked
    against the LFS sha256 the Hub announces, pinned on first use, then converted."""
    model, data = official_toy_on_the_hub(hub, "toy-hf-upstream")
    hub.flip("folder/official.safetensors", offset=-3, repo_id="authors/official")
    with pytest.raises(IntegrityError, match="twice in a row; nothing was kept"):
        zoo.load("toy-hf-upstream")
    assert not (Path(os.environ["ZOO_HOME"]) / "pins" / "toy-hf-upstream.json").exists()
    hub.clear_faults()
    assert same_weights(model, zoo.load("toy-hf-upstream"))
    pins = json.loads((Path(os.environ["ZOO_HOME"]) / "pins" / "toy-hf-upstream.json").read_text())
    assert pins["official.safetensors"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert hashlib.sha256(data).hexdigest() in hf_blob_names(isolated_caches, "authors/official")
    hub.reset_requests()
    assert same_weights(model, zoo.load("toy-hf-upstream"))  # converted and cached: no network call
    assert hub.requests == []


def test_publish_without_network_or_rights_is_one_line(hub, capsys, monkeypatch, tmp_path):
    ToyRegressor(width=4).save_pretrained(tmp_path / "toy")
    monkeypatch.setenv("ZOO_HF_ENDPOINT", "http://127.0.0.1:9")
    assert main(["publish", str(tmp_path / "toy"), "hf://user/toy-up"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoo: error: cannot reach the Hub at http://127.0.0.1:9 to upload user/toy-up")
    assert err.count("\n") == 1
    assert main(["publish", str(tmp_path / "toy"), "hf://user/toy-up", "--endpoint", "http://127.0.0.1:7"]) == 2
    assert capsys.readouterr().err.startswith("zoo: error: cannot reach the Hub at http://127.0.0.1:7 to upload")
    monkeypatch.setenv("ZOO_HF_ENDPOINT", hub.endpoint)
    hub.token = "the-right-one"
    assert main(["publish", str(tmp_path / "toy"), "hf://user/toy-up"]) == 2
    err = capsys.readouterr().err
    assert "refused the upload to user/toy-up" in err and "HF_TOKEN" in err and err.count("\n") == 1
