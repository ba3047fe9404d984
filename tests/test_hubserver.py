"""The loopback Hub (tests/hubserver.py) against the real huggingface_hub client and git: what the zoo's hub tests
take on trust and cannot see through the zoo (git's blob ids, the error an absent file gets, the request log and
the stall hook that the kill test relies on). Everything else the server does is exercised by tests/core/test_hub_*.py
through zoo.publish and zoo.load."""

import hashlib
import http.client
import json
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import HfApi, constants, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError
from safetensors.numpy import save_file

from hubserver import git_blob_sha1, lfs_pointer

REPO = "user/tiny"
TOKEN = "dummy"


@pytest.fixture(autouse=True)
def no_xet(monkeypatch):
    # huggingface_hub may have been imported before conftest set HF_HUB_DISABLE_XET; it is read at call time
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture
def api(hub):
    return HfApi(endpoint=hub.endpoint, token=TOKEN)


@pytest.fixture
def folder(tmp_path):
    """A small model repo folder: safetensors weights (LFS), config.json and README.md (regular git blobs)."""
    src = tmp_path / "src"
    src.mkdir()
    save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4)}, str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({"model_type": "toy", "width": 4}))
    (src / "README.md").write_text("---\nlicense: mit\n---\n# Tiny\n")
    return src


@pytest.fixture
def published(api, folder):
    api.create_repo(REPO, exist_ok=True)
    return api.upload_folder(repo_id=REPO, folder_path=folder, commit_message="add tiny model")


def download(hub, path, revision="main", cache=None):
    return Path(hf_hub_download(REPO, path, revision=revision, endpoint=hub.endpoint, cache_dir=cache, token=TOKEN))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_hash_object(data: bytes) -> str:
    return subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True).stdout \
        .decode().strip()


def test_upload_folder_routes_weights_through_lfs_with_git_blob_ids(hub, api, folder, published):
    assert published.oid == hub.head(REPO)
    weights, config = (folder / "model.safetensors").read_bytes(), (folder / "config.json").read_bytes()
    # the weights go through the LFS batch API and a PUT; the rest is inline in the one commit
    assert hub.count("PUT", f"/{REPO}.git/info/lfs/objects/{sha256(weights)}") == 1
    assert hub.count("POST", "/commit/main") == 1
    assert hub.file_bytes(REPO, "model.safetensors") == weights
    siblings = {s.rfilename: s for s in api.model_info(REPO, files_metadata=True).siblings}
    lfs = siblings["model.safetensors"].lfs
    assert (lfs.sha256, lfs.size) == (sha256(weights), len(weights))
    # blob ids are git's (the zoo checks regular files against them): the LFS pointer's, or the content's
    pointer = lfs_pointer(sha256(weights), len(weights))
    assert siblings["model.safetensors"].blob_id == git_blob_sha1(pointer) == git_hash_object(pointer)
    assert siblings["config.json"].lfs is None
    assert siblings["config.json"].blob_id == git_blob_sha1(config) == git_hash_object(config)


def test_not_found_errors(hub, api, published, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("user/absent", "config.json", endpoint=hub.endpoint, cache_dir=cache, token=TOKEN)
    with pytest.raises(EntryNotFoundError):
        download(hub, "absent.json", "main", cache)
    for revision in ("no-such-branch", "f" * 40):
        with pytest.raises(RevisionNotFoundError):
            download(hub, "config.json", revision, cache)


def test_request_log(hub, published, tmp_path):
    # the zoo's tests assert `hub.requests == []` for "no network call": the log must see every request
    hub.reset_requests()
    assert hub.requests == [] and hub.count() == 0
    download(hub, "config.json", published.oid, tmp_path / "cache")
    assert hub.count("GET", f"/{REPO}/resolve/{published.oid}/config.json") == 1
    assert hub.count(path_contains="/resolve/") == len(hub.requests) >= 1
    assert hub.count("PUT") == 0


def test_stall_sends_the_start_then_hangs(hub, folder, published):
    # the kill -9 test relies on the client being mid-transfer when it is killed
    weights = (folder / "model.safetensors").read_bytes()
    hub.stall("model.safetensors", after=10, seconds=0.5, times=1)
    url = f"{hub.endpoint}/{REPO}/resolve/main/model.safetensors"
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as response:  # any client: what counts is the bytes on the wire
        assert int(response.headers["Content-Length"]) == len(weights)
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()
    assert cut.value.partial == weights[:10] and time.monotonic() - started >= 0.5
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == weights  # used up
