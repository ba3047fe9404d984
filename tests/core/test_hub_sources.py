"""Embedded and upstream sources: pins, tampering, truncation, offline behaviour and concurrent first loads."""

import hashlib
from pathlib import Path

import pytest
import torch
from core_testdata import load_in_processes, official_toy, same_weights, weight_sum
from toy import ToyRegressor

import zoo
from zoo.io import sha256_file
from zoo.hub import DownloadError, IntegrityError, OfflineError
from zoo.registry import FileSpec, ModelEntry, register_model


def _upstream_entry(name, server, data, *, pinned=True):
    spec = FileSpec("official.safetensors", hashlib.sha256(data).hexdigest() if pinned else None,
                    len(data) if pinned else None, url=f"{server.url}/{name}/official.safetensors")
    server.files[f"/{name}/official.safetensors"] = data
    return register_model(ModelEntry(
        name=name, method="toy", upstream=(spec,), converter="toy:convert_upstream", convert_args={"width": 8},
    ))


def test_upstream_download_convert_and_cache(file_server):
    model, data = official_toy()
    _upstream_entry("toy-up", file_server, data)
    assert same_weights(model, zoo.load("toy-up"))
    n = len(file_server.hits)
    zoo.load("toy-up")  # cached: no request
    assert len(file_server.hits) == n


def test_upstream_tampered_file_is_rejected_and_not_kept(file_server, isolated_caches):
    _, data = official_toy()
    entry = _upstream_entry("toy-tampered", file_server, data)
    file_server.files["/toy-tampered/official.safetensors"] = data[:-1] + bytes([data[-1] ^ 1])
    with pytest.raises(IntegrityError, match=f"expected sha256 {entry.upstream[0].sha256}"):
        zoo.load("toy-tampered")
    downloads = isolated_caches / "zoo" / "downloads" / "toy-tampered"
    assert not downloads.exists() or not any(downloads.iterdir())
    file_server.files["/toy-tampered/official.safetensors"] = data  # server fixed: next load works
    zoo.load("toy-tampered")


def test_upstream_truncated_transfer_is_retried_then_reported(file_server, isolated_caches):
    _, data = official_toy()
    _upstream_entry("toy-up-trunc", file_server, data)
    file_server.drop_after = [1] * 5  # every try (each resuming the last) gets one byte
    with pytest.raises(OfflineError, match="failed after 5 tries") as err:
        zoo.load("toy-up-trunc")
    assert file_server.pauses == [1, 2, 4, 8]  # backoff between the tries
    downloads = isolated_caches / "zoo" / "downloads" / "toy-up-trunc"
    assert str(downloads / "official.safetensors") in str(err.value)  # where a manual copy can go
    assert not (downloads / "official.safetensors").exists()  # only the resumable .part, never the file itself
    zoo.load("toy-up-trunc")


def test_cached_file_tampered_on_disk_is_deleted(file_server, isolated_caches):
    _, data = official_toy()
    _upstream_entry("toy-disk", file_server, data)
    zoo.load("toy-disk")
    cached = isolated_caches / "zoo" / "downloads" / "toy-disk" / "official.safetensors"
    raw = bytearray(cached.read_bytes())
    raw[-1] ^= 1
    cached.write_bytes(bytes(raw))
    with pytest.raises(IntegrityError, match="bad copy was deleted"):
        zoo.load("toy-disk")
    assert not cached.exists()
    zoo.load("toy-disk")  # downloads it again


def test_html_page_is_never_pinned(file_server, isolated_caches):
    _upstream_entry("toy-html", file_server, b"<!DOCTYPE html><p>Sign in to continue</p>", pinned=False)
    with pytest.raises(DownloadError, match="HTML page"):
        zoo.load("toy-html")
    assert not (isolated_caches / "zoo" / "pins" / "toy-html.json").exists()
    assert not (isolated_caches / "zoo" / "downloads" / "toy-html" / "official.safetensors").exists()


def test_unpinned_upstream_is_pinned_on_first_use(file_server):
    _, data = official_toy()
    _upstream_entry("toy-tofu", file_server, data, pinned=False)
    zoo.load("toy-tofu")
    _, other = official_toy()
    file_server.files["/toy-tofu/official.safetensors"] = other
    zoo.load("toy-tofu")  # cached copy matches the recorded pin
    pins = (Path(zoo.hub.zoo_home()) / "pins" / "toy-tofu.json").read_text()
    assert hashlib.sha256(data).hexdigest() in pins


def test_offline_without_cache_says_how_to_get_it(file_server, monkeypatch):
    _, data = official_toy()
    _upstream_entry("toy-offline", file_server, data)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="zoo download toy-offline") as err:
        zoo.load("toy-offline")
    assert "downloads/toy-offline" in str(err.value) and "local repo folder" in str(err.value)
    assert file_server.hits == []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    zoo.load("toy-offline")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    n = len(file_server.hits)
    zoo.load("toy-offline")  # cached: loads with zero network calls
    assert len(file_server.hits) == n


def test_no_network_gives_offline_error(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)  # the retries' backoff
    register_model(ModelEntry(
        name="toy-unreachable", method="toy", converter="toy:convert_upstream",
        upstream=(FileSpec("official.safetensors", "1" * 64, 10, url="http://127.0.0.1:9/official.safetensors"),),
    ))
    with pytest.raises(OfflineError, match="download of http://127.0.0.1:9/official.safetensors failed"):
        zoo.load("toy-unreachable")


def test_embedded_source(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    model = ToyRegressor(width=4)
    names = model.save_pretrained(hub / "toy-emb")
    files = tuple(FileSpec(n, sha256_file(hub / "toy-emb" / n), (hub / "toy-emb" / n).stat().st_size) for n in names)
    register_model(ModelEntry(name="toy-emb", method="toy", files=files))
    monkeypatch.setenv("ZOO_HUB", str(hub))
    assert torch.equal(zoo.load("toy-emb").net[0].weight, model.net[0].weight)
    weights = hub / "toy-emb" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4])  # truncated in the source tree
    with pytest.raises(IntegrityError, match="restore it"):
        zoo.load("toy-emb")
    assert weights.exists()  # never deletes files it does not own


def test_two_processes_load_one_uncached_model(file_server):
    model, data = official_toy()
    entry = _upstream_entry("toy-race", file_server, data)
    assert load_in_processes([entry, entry]) == pytest.approx([weight_sum(model)] * 2)
    assert file_server.hits.count("/toy-race/official.safetensors") == 1  # the lock made the second one wait
