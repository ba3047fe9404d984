"""The loopback Hub (tests/hubserver.py) driven by the real huggingface_hub client: the endpoints the zoo reaches
(repo create, uploads through preupload/LFS/commit, model_info, paths-info, resolve) and the fault hooks behave
as the zoo's hub tests assume."""

import os

os.environ.setdefault("HF_HUB_DISABLE_XET", "1")  # before huggingface_hub is imported: plain HTTP + LFS only

import hashlib
import json
import re
import subprocess
import threading
import time
from pathlib import Path

import httpx2
import numpy as np
import pytest
from huggingface_hub import HfApi, ModelCard, constants, file_download, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from safetensors.numpy import save_file

from hubserver import git_blob_sha1, hub_server, lfs_pointer

REPO = "user/tiny"
TOKEN = "dummy"


@pytest.fixture(autouse=True)
def no_xet(monkeypatch):
    # huggingface_hub may have been imported before this module; the xet switch is read from constants at call time
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture
def hub():
    with hub_server() as server:
        yield server


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
    (src / "README.md").write_text("---\nlicense: mit\ntags:\n- zoo\nlibrary_name: zoo\n---\n# Tiny\n")
    return src


@pytest.fixture
def published(api, folder):
    api.create_repo(REPO, exist_ok=True)
    return api.upload_folder(repo_id=REPO, folder_path=folder, commit_message="add tiny model")


def download(hub, path, revision="main", cache=None, **kwargs):
    kwargs.setdefault("token", TOKEN)
    return Path(hf_hub_download(REPO, path, revision=revision, endpoint=hub.endpoint, cache_dir=cache, **kwargs))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_hash_object(data: bytes) -> str:
    return subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True).stdout \
        .decode().strip()


# ----------------------------------------------------------------------------- endpoints
def test_create_repo_exist_ok_conflict_and_initial_commit(hub, api):
    first = api.create_repo(REPO, exist_ok=True)
    assert api.create_repo(REPO, exist_ok=True).repo_id == first.repo_id == REPO
    with pytest.raises(HfHubHTTPError) as err:
        api.create_repo(REPO)
    assert err.value.response.status_code == 409
    info = api.model_info(REPO)  # a new repo holds the initial commit, with a .gitattributes
    assert [s.rfilename for s in info.siblings] == [".gitattributes"]
    assert info.sha == hub.head(REPO) and re.fullmatch(r"[0-9a-f]{40}", info.sha) and info.private is False


def test_upload_folder_routes_weights_through_lfs(hub, api, folder, published, tmp_path):
    assert re.fullmatch(r"[0-9a-f]{40}", published.oid) and published.oid == hub.head(REPO)
    weights, config = (folder / "model.safetensors").read_bytes(), (folder / "config.json").read_bytes()
    # README.md is sent to validate-yaml first (the client asks more than once); the weights go through the LFS
    # batch API, a PUT to the pre-signed upload URL and verify; the rest is inline in the one commit
    assert hub.count("POST", "/api/validate-yaml") >= 1
    for method, fragment in (("POST", "/preupload/main"),
                             ("POST", f"/{REPO}.git/info/lfs/objects/batch"),
                             ("PUT", f"/{REPO}.git/info/lfs/objects/{sha256(weights)}"),
                             ("POST", f"/{REPO}.git/info/lfs/objects/verify"), ("POST", "/commit/main")):
        assert hub.count(method, fragment) == 1, (method, fragment)
    assert hub.file_bytes(REPO, "model.safetensors") == weights

    info = api.model_info(REPO, revision=published.oid, files_metadata=True)
    assert info.sha == published.oid
    siblings = {s.rfilename: s for s in info.siblings}
    assert sorted(siblings) == [".gitattributes", "README.md", "config.json", "model.safetensors"]
    lfs = siblings["model.safetensors"].lfs
    assert (lfs.sha256, lfs.size, siblings["model.safetensors"].size) == (sha256(weights), len(weights), len(weights))
    pointer = lfs_pointer(sha256(weights), len(weights))
    assert lfs.pointer_size == len(pointer)
    # blob ids are git's: the LFS pointer's for LFS files, the content's for regular ones
    assert siblings["model.safetensors"].blob_id == git_blob_sha1(pointer) == git_hash_object(pointer)
    assert siblings["config.json"].lfs is None
    assert siblings["config.json"].blob_id == git_blob_sha1(config) == git_hash_object(config)
    # the card comes back as uploaded (its metadata is parsed client-side; the server checks no Hub rules)
    card = ModelCard.load(download(hub, "README.md", published.oid, tmp_path / "cache"))
    assert card.data.license == "mit" and card.data.tags == ["zoo"] and card.data.library_name == "zoo"


def test_revisions_stay_readable_and_unchanged_files_are_not_recommitted(hub, api, folder, published, tmp_path):
    cache = tmp_path / "cache"
    for path in ("model.safetensors", "config.json", "README.md"):
        assert download(hub, path, published.oid, cache).read_bytes() == (folder / path).read_bytes()
    old_config, new_config = (folder / "config.json").read_bytes(), b'{"model_type": "toy", "width": 8}'
    second = api.upload_file(path_or_fileobj=new_config, path_in_repo="config.json", repo_id=REPO)
    assert re.fullmatch(r"[0-9a-f]{40}", second.oid) and second.oid != published.oid
    assert download(hub, "config.json", published.oid, cache).read_bytes() == old_config
    assert download(hub, "config.json", "main", cache).read_bytes() == new_config
    assert api.model_info(REPO).sha == second.oid
    assert api.model_info(REPO, revision=published.oid).sha == published.oid
    # identical content: the preupload oid lets the client skip it, so no commit is made
    hub.reset_requests()
    assert api.upload_file(path_or_fileobj=new_config, path_in_repo="config.json", repo_id=REPO).oid == second.oid
    assert hub.count("POST", "/commit/") == 0 and hub.head(REPO) == second.oid


def test_paths_info_and_hidden_hashes(hub, api, folder, published):
    weights = (folder / "model.safetensors").read_bytes()
    infos = api.get_paths_info(REPO, ["config.json", "model.safetensors", "missing.bin"], revision=published.oid)
    assert [i.path for i in infos] == ["config.json", "model.safetensors"]
    assert infos[0].lfs is None and infos[0].blob_id == git_blob_sha1((folder / "config.json").read_bytes())
    assert (infos[1].lfs.sha256, infos[1].size) == (sha256(weights), len(weights))

    hub.hide_hashes = "info"  # a mirror: model_info without per-file hashes, paths-info still has them
    (sibling,) = [s for s in api.model_info(REPO, files_metadata=True).siblings if s.rfilename == "model.safetensors"]
    assert (sibling.lfs, sibling.blob_id, sibling.size) == (None, None, None)
    assert api.get_paths_info(REPO, ["model.safetensors"])[0].lfs.sha256 == sha256(weights)
    hub.hide_hashes = "all"  # no hashes anywhere
    (info,) = api.get_paths_info(REPO, ["model.safetensors"])
    assert (info.lfs, info.blob_id, info.size) == (None, None, len(weights))


def test_not_found_errors(hub, api, published, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("user/absent", "config.json", endpoint=hub.endpoint, cache_dir=cache, token=TOKEN)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("user/absent")
    with pytest.raises(EntryNotFoundError):
        download(hub, "absent.json", "main", cache)
    for revision in ("no-such-branch", "f" * 40):
        with pytest.raises(RevisionNotFoundError):
            download(hub, "config.json", revision, cache)
        with pytest.raises(RevisionNotFoundError):
            api.model_info(REPO, revision=revision)


def test_writes_need_a_token_and_private_repos_hide_without_it(hub, published, tmp_path):
    anonymous = HfApi(endpoint=hub.endpoint, token=False)
    with pytest.raises(HfHubHTTPError) as err:
        anonymous.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO)
    assert err.value.response.status_code == 401 and hub.head(REPO) == published.oid
    hub.token = "the-right-one"  # now only that token may write
    with pytest.raises(HfHubHTTPError) as err:
        HfApi(endpoint=hub.endpoint, token=TOKEN).upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO)
    assert err.value.response.status_code == 401 and hub.head(REPO) == published.oid
    HfApi(endpoint=hub.endpoint, token="the-right-one").upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                                     repo_id=REPO)
    assert hub.file_bytes(REPO, "x.txt") == b"x"
    # a private repo is invisible without the token, like a missing one
    hub.create_repo("user/secret", private=True)
    hub.seed("user/secret", {"config.json": b"{}"})
    with pytest.raises(RepositoryNotFoundError):
        anonymous.model_info("user/secret")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("user/secret", "config.json", endpoint=hub.endpoint, cache_dir=tmp_path / "c", token=False)
    assert HfApi(endpoint=hub.endpoint, token="the-right-one").model_info("user/secret").private is True


def test_lfs_upload_is_verified(hub, api):
    api.create_repo(REPO)
    data = b"\0binary payload\0" * 4
    headers = {"Authorization": f"Bearer {TOKEN}"}
    batch_url = f"{hub.endpoint}/{REPO}.git/info/lfs/objects/batch"
    request = {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": sha256(data), "size": len(data)}]}
    href = httpx2.post(batch_url, headers=headers, json=request).json()["objects"][0]["actions"]["upload"]["href"]
    assert httpx2.put(href, content=data[:-1] + b"!").status_code == 400  # sha256 mismatch
    assert httpx2.put(href.replace("signature=", "signature=0"), content=data).status_code == 403
    assert httpx2.put(href, content=data).status_code == 200
    assert "actions" not in httpx2.post(batch_url, headers=headers, json=request).json()["objects"][0]  # stored
    # committing an LFS pointer whose object was never uploaded is refused, and makes no commit
    head = hub.head(REPO)
    ndjson = "\n".join(json.dumps(line) for line in [
        {"key": "header", "value": {"summary": "bad"}},
        {"key": "lfsFile", "value": {"path": "w.bin", "algo": "sha256", "oid": "a" * 64, "size": 3}},
    ])
    response = httpx2.post(f"{hub.endpoint}/api/models/{REPO}/commit/main", headers=headers, content=ndjson)
    assert response.status_code == 422 and hub.head(REPO) == head


def test_range_requests_and_head(hub, published, folder):
    weights = (folder / "model.safetensors").read_bytes()
    url = f"{hub.endpoint}/{REPO}/resolve/main/model.safetensors"
    part = httpx2.get(url, headers={"Range": "bytes=8-19"})
    assert part.status_code == 206 and part.content == weights[8:20]
    assert part.headers["Content-Range"] == f"bytes 8-19/{len(weights)}"
    assert httpx2.get(url, headers={"Range": "bytes=-5"}).content == weights[-5:]
    assert httpx2.get(url, headers={"Range": "bytes=20-"}).content == weights[20:]
    assert httpx2.get(url, headers={"Range": f"bytes={len(weights)}-"}).status_code == 416
    head = httpx2.head(url)
    assert head.headers["X-Linked-Etag"] == head.headers["ETag"] == f'"{sha256(weights)}"'
    assert int(head.headers["X-Linked-Size"]) == len(weights) == int(head.headers["Content-Length"])
    assert head.headers["X-Repo-Commit"] == published.oid


# ----------------------------------------------------------------------------- request log and faults
def test_request_log(hub, published, tmp_path):
    hub.reset_requests()
    assert hub.requests == [] and hub.count() == 0
    download(hub, "config.json", published.oid, tmp_path / "cache")
    assert hub.count("GET", f"/{REPO}/resolve/{published.oid}/config.json") == 1
    assert hub.count(path_contains="/resolve/") == len(hub.requests) >= 1
    assert hub.count("PUT") == 0
    download(hub, "config.json", published.oid, tmp_path / "cache")  # cached at a commit: no request
    assert hub.count("GET") == 1


def test_tamper_and_flip(hub, api, folder, published, tmp_path):
    weights = (folder / "model.safetensors").read_bytes()
    hub.tamper("model.safetensors", times=1)
    body = download(hub, "model.safetensors", published.oid, tmp_path / "a").read_bytes()
    assert len(body) == len(weights) and all(a ^ b == 0xFF for a, b in zip(body, weights))
    assert download(hub, "model.safetensors", published.oid, tmp_path / "b").read_bytes() == weights  # used up
    hub.flip("model.safetensors", offset=-3, repo_id="user/other")  # another repo's file: no effect here
    assert download(hub, "model.safetensors", published.oid, tmp_path / "c").read_bytes() == weights
    hub.flip("model.safetensors", offset=-3, repo_id=REPO)
    for cache in ("d", "e"):  # until cleared
        body = download(hub, "model.safetensors", published.oid, tmp_path / cache).read_bytes()
        assert [i for i, (a, b) in enumerate(zip(body, weights)) if a != b] == [len(weights) - 3]
    hub.clear_faults()
    assert download(hub, "model.safetensors", published.oid, tmp_path / "f").read_bytes() == weights


def test_truncated_transfer_is_retried(hub, folder, published, tmp_path, monkeypatch):
    monkeypatch.setattr(file_download.time, "sleep", lambda seconds: None)  # skip the client's retry pause
    hub.truncate("model.safetensors", keep=20, times=1)
    local = download(hub, "model.safetensors", published.oid, tmp_path / "cache")
    assert local.read_bytes() == (folder / "model.safetensors").read_bytes()
    assert hub.count("GET", "/resolve/") == 2  # the cut-off response, then a retry


def test_truncated_transfer_that_never_completes_raises(hub, published, tmp_path, monkeypatch):
    monkeypatch.setattr(file_download.time, "sleep", lambda seconds: None)  # skip the client's retry pauses
    hub.truncate("model.safetensors", keep=0)
    with pytest.raises(httpx2.RemoteProtocolError):
        download(hub, "model.safetensors", published.oid, tmp_path / "cache")
    blobs = tmp_path / "cache" / f"models--{REPO.replace('/', '--')}" / "blobs"
    assert not [p for p in blobs.iterdir() if not p.name.endswith(".incomplete")]


def test_stall_sends_the_start_then_hangs(hub, folder, published):
    weights = (folder / "model.safetensors").read_bytes()
    hub.stall("model.safetensors", after=10, seconds=0.5, times=1)
    url = f"{hub.endpoint}/{REPO}/resolve/main/model.safetensors"
    started = time.monotonic()
    received = b""
    with pytest.raises(httpx2.RemoteProtocolError):
        with httpx2.stream("GET", url, timeout=10) as response:
            assert int(response.headers["Content-Length"]) == len(weights)
            for chunk in response.iter_raw():
                received += chunk
    assert received == weights[:10] and time.monotonic() - started >= 0.5
    assert httpx2.get(url).content == weights  # used up


def test_injected_failure_and_delay(hub, api, published, tmp_path):
    hub.fail(500, path_contains="/api/models/", times=1)
    with pytest.raises(HfHubHTTPError) as err:
        api.model_info(REPO)
    assert err.value.response.status_code == 500
    assert api.model_info(REPO).sha == published.oid  # only once
    # delayed answers are served concurrently
    hub.delay(0.3, method="GET", path_contains="/resolve/")
    results = []
    threads = [threading.Thread(target=lambda p=p: results.append(download(hub, p, published.oid, tmp_path / "c")))
               for p in ("config.json", "README.md", "model.safetensors")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and hub.peak_in_flight >= 2
