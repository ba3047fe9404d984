"""The loopback Hub (tests/hubserver.py) driven by the real huggingface_hub client: uploads, commits, downloads,
errors and injected faults behave as they do against huggingface.co."""

import os

os.environ.setdefault("HF_HUB_DISABLE_XET", "1")  # before huggingface_hub is imported: plain HTTP + LFS only

import hashlib
import json
import re
import subprocess
import threading
from pathlib import Path

import httpx2
import numpy as np
import pytest
from huggingface_hub import HfApi, ModelCard, constants, hf_hub_download, snapshot_download
from huggingface_hub import file_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from safetensors.numpy import save_file

import hubserver
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
    (src / "sub").mkdir(parents=True)
    save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(5, dtype=np.float16)},
              str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({"model_type": "toy", "width": 4}))
    (src / "README.md").write_text("---\nlicense: mit\ntags:\n- zoo\nlibrary_name: pytorch\n---\n# Tiny\n")
    (src / "sub" / "notes.txt").write_text("nested file\n")
    return src


@pytest.fixture
def published(api, folder):
    api.create_repo(REPO, exist_ok=True)
    info = api.upload_folder(repo_id=REPO, folder_path=folder, commit_message="add tiny model")
    return info


def download(hub, path, revision="main", cache=None, **kwargs):
    return Path(hf_hub_download(REPO, path, revision=revision, endpoint=hub.endpoint, cache_dir=cache,
                                token=TOKEN, **kwargs))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- repos and commits
def test_create_repo_exist_ok_and_conflict(api):
    first = api.create_repo(REPO, exist_ok=True)
    second = api.create_repo(REPO, exist_ok=True)
    assert first.repo_id == second.repo_id == REPO
    with pytest.raises(HfHubHTTPError) as err:
        api.create_repo(REPO)
    assert err.value.response.status_code == 409
    # a new repo holds the Hub's initial commit with its default .gitattributes
    assert api.list_repo_files(REPO) == [".gitattributes"]
    api.delete_repo(REPO)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info(REPO)


def test_upload_folder_routes_weights_through_lfs(hub, api, folder, published, tmp_path):
    assert re.fullmatch(r"[0-9a-f]{40}", published.oid)
    assert published.commit_url == f"{hub.endpoint}/{REPO}/commit/{published.oid}"
    weights = (folder / "model.safetensors").read_bytes()
    # the weights went through the LFS batch API and a PUT to its (pre-signed) upload URL, the rest inline
    assert hub.count("POST", f"/{REPO}.git/info/lfs/objects/batch") == 1
    assert hub.requests.count(("PUT", f"/{REPO}.git/info/lfs/objects/{sha256(weights)}")) == 1
    assert hub.count("POST", "/api/validate-yaml") >= 1
    assert api.list_repo_files(REPO) == [".gitattributes", "README.md", "config.json", "model.safetensors",
                                         "sub/notes.txt"]

    info = api.model_info(REPO, files_metadata=True)
    assert info.sha == published.oid
    siblings = {s.rfilename: s for s in info.siblings}
    lfs = siblings["model.safetensors"].lfs
    assert (lfs.sha256, lfs.size, siblings["model.safetensors"].size) == (sha256(weights), len(weights), len(weights))
    pointer = lfs_pointer(sha256(weights), len(weights))
    assert lfs.pointer_size == len(pointer) and siblings["model.safetensors"].blob_id == git_blob_sha1(pointer)
    config = (folder / "config.json").read_bytes()
    assert siblings["config.json"].lfs is None and siblings["config.json"].blob_id == git_blob_sha1(config)
    assert info.safetensors.parameters == {"F32": 12, "F16": 5} and info.safetensors.total == 17
    assert info.card_data.license == "mit" and "zoo" in info.tags

    # blob ids and the root tree id are exactly what git computes for the same content (LFS files as pointers)
    work = tmp_path / "git"
    work.mkdir()
    for path in api.list_repo_files(REPO):
        data = hub.file_bytes(REPO, path)
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(lfs_pointer(sha256(data), len(data)) if path == "model.safetensors" else data)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    tree = subprocess.run([*git, "write-tree"], check=True, capture_output=True, text=True).stdout.strip()
    assert tree == hub._repo("model", REPO).resolve("main").tree_ids[""]
    folders = {f.path: f.tree_id for f in api.list_repo_tree(REPO) if not hasattr(f, "size")}
    sub = subprocess.run([*git, "rev-parse", f"{tree}:sub"], check=True, capture_output=True, text=True).stdout
    assert folders == {"sub": sub.strip()}


def test_download_at_commit_and_branch_and_snapshot(hub, folder, published, tmp_path):
    cache = tmp_path / "cache"
    for path in ("model.safetensors", "config.json", "README.md", "sub/notes.txt"):
        expected = (folder / path).read_bytes()
        assert download(hub, path, published.oid, cache).read_bytes() == expected
        assert download(hub, path, "main", cache).read_bytes() == expected
    snapshot = Path(snapshot_download(REPO, endpoint=hub.endpoint, cache_dir=cache, token=TOKEN))
    assert snapshot.name == published.oid
    for path in ("model.safetensors", "config.json", "README.md", "sub/notes.txt"):
        assert (snapshot / path).read_bytes() == (folder / path).read_bytes()
    # a short commit prefix resolves too
    assert download(hub, "config.json", published.oid[:10], cache).read_bytes() == (folder / "config.json").read_bytes()


def test_second_commit_keeps_old_revision_readable(hub, api, folder, published, tmp_path):
    cache = tmp_path / "cache"
    old_config = (folder / "config.json").read_bytes()
    new_config = json.dumps({"model_type": "toy", "width": 8}).encode()
    second = api.upload_file(path_or_fileobj=new_config, path_in_repo="config.json", repo_id=REPO)
    assert re.fullmatch(r"[0-9a-f]{40}", second.oid) and second.oid != published.oid
    assert download(hub, "config.json", published.oid, cache).read_bytes() == old_config
    assert download(hub, "config.json", "main", cache).read_bytes() == new_config
    assert download(hub, "config.json", second.oid, cache).read_bytes() == new_config
    commits = api.list_repo_commits(REPO)
    assert [c.commit_id for c in commits[:2]] == [second.oid, published.oid] and len(commits) == 3

    # re-uploading identical content is skipped client-side thanks to the preupload oid: no new commit
    hub.reset_requests()
    same = api.upload_file(path_or_fileobj=new_config, path_in_repo="config.json", repo_id=REPO)
    assert same.oid == second.oid and hub.count("POST", "/commit/") == 0

    # deleting a file: gone at main, still there at the older commit
    third = api.delete_file("sub/notes.txt", repo_id=REPO)
    assert "sub/notes.txt" not in api.list_repo_files(REPO)
    assert "sub/notes.txt" in api.list_repo_files(REPO, revision=second.oid)
    with pytest.raises(EntryNotFoundError):
        download(hub, "sub/notes.txt", third.oid, cache)
    assert download(hub, "sub/notes.txt", second.oid, cache).read_text() == "nested file\n"


def test_parent_commit_and_pull_requests(hub, api, published):
    with pytest.raises(HfHubHTTPError) as err:
        api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO, parent_commit="0" * 40)
    assert err.value.response.status_code == 412
    pr = api.upload_file(path_or_fileobj=b"pr\n", path_in_repo="pr.txt", repo_id=REPO, create_pr=True)
    assert pr.pr_url == f"{hub.endpoint}/{REPO}/discussions/1"
    assert hub.head(REPO, "main") == published.oid
    assert hub.head(REPO, "refs/pr/1") == pr.oid
    assert "pr.txt" in api.list_repo_files(REPO, revision="refs/pr/1")
    refs = api.list_repo_refs(REPO, include_pull_requests=True)
    assert [(r.ref, r.target_commit) for r in refs.pull_requests] == [("refs/pr/1", pr.oid)]


def test_tree_listing_paginates_and_expands(hub, api, published, monkeypatch):
    monkeypatch.setattr(hubserver, "TREE_PAGE_SIZE", 2)
    entries = list(api.list_repo_tree(REPO, recursive=True))
    assert [e.path for e in entries] == ["sub", ".gitattributes", "README.md", "config.json", "model.safetensors",
                                         "sub/notes.txt"]
    assert hub.count("GET", f"/api/models/{REPO}/tree/main") == 3  # 6 entries, 2 per page
    (nested,) = api.list_repo_tree(REPO, path_in_repo="sub", expand=True)
    assert nested.path == "sub/notes.txt" and nested.last_commit.oid == published.oid
    assert nested.last_commit.title == "add tiny model"
    with pytest.raises(EntryNotFoundError):
        list(api.list_repo_tree(REPO, path_in_repo="missing"))
    infos = api.get_paths_info(REPO, ["config.json", "sub", "missing.bin"])
    assert [i.path for i in infos] == ["config.json", "sub"]


# ----------------------------------------------------------------------------- errors
def test_not_found_errors(hub, api, published, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("user/absent", "config.json", endpoint=hub.endpoint, cache_dir=cache, token=TOKEN)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("user/absent")
    with pytest.raises(EntryNotFoundError):
        download(hub, "absent.json", "main", cache)
    with pytest.raises(RevisionNotFoundError):
        download(hub, "config.json", "no-such-branch", cache)
    with pytest.raises(RevisionNotFoundError):
        download(hub, "config.json", "f" * 40, cache)
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        snapshot_download(REPO, revision="no-such-branch", endpoint=hub.endpoint, cache_dir=cache, token=TOKEN)


def test_writes_need_a_token(hub, published):
    anonymous = HfApi(endpoint=hub.endpoint, token=False)
    with pytest.raises(HfHubHTTPError) as err:
        anonymous.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO)
    assert err.value.response.status_code == 401
    assert hub.head(REPO) == published.oid
    # a private repo is invisible without a token, like a missing one
    HfApi(endpoint=hub.endpoint, token=TOKEN).create_repo("user/secret", private=True)
    with pytest.raises(RepositoryNotFoundError):
        anonymous.model_info("user/secret")
    assert HfApi(endpoint=hub.endpoint, token=TOKEN).model_info("user/secret").private is True


def test_lfs_upload_is_verified(hub, api):
    api.create_repo(REPO)
    data = b"\0binary payload\0" * 4
    headers = {"Authorization": f"Bearer {TOKEN}"}
    batch = httpx2.post(f"{hub.endpoint}/{REPO}.git/info/lfs/objects/batch", headers=headers, json={
        "operation": "upload", "transfers": ["basic"], "objects": [{"oid": sha256(data), "size": len(data)}],
    }).json()
    href = batch["objects"][0]["actions"]["upload"]["href"]
    wrong = data[:-1] + b"!"
    assert httpx2.put(href, content=wrong).status_code == 400  # sha256 mismatch
    assert httpx2.put(href.replace("signature=", "signature=0"), content=data).status_code == 403
    assert httpx2.put(href, content=data).status_code == 200
    again = httpx2.post(f"{hub.endpoint}/{REPO}.git/info/lfs/objects/batch", headers=headers, json={
        "operation": "upload", "objects": [{"oid": sha256(data), "size": len(data)}],
    }).json()
    assert "actions" not in again["objects"][0]  # already stored: nothing to upload
    # committing an LFS pointer whose object was never uploaded is refused
    ndjson = "\n".join(json.dumps(line) for line in [
        {"key": "header", "value": {"summary": "bad"}},
        {"key": "lfsFile", "value": {"path": "w.bin", "algo": "sha256", "oid": "a" * 64, "size": 3}},
    ])
    response = httpx2.post(f"{hub.endpoint}/api/models/{REPO}/commit/main", headers=headers, content=ndjson)
    assert response.status_code == 422 and len(api.list_repo_commits(REPO)) == 1


def test_range_requests(hub, published, folder):
    weights = (folder / "model.safetensors").read_bytes()
    url = f"{hub.endpoint}/{REPO}/resolve/main/model.safetensors"
    part = httpx2.get(url, headers={"Range": "bytes=8-19"})
    assert part.status_code == 206 and part.content == weights[8:20]
    assert part.headers["Content-Range"] == f"bytes 8-19/{len(weights)}"
    assert httpx2.get(url, headers={"Range": "bytes=-5"}).content == weights[-5:]
    assert httpx2.get(url, headers={"Range": f"bytes={len(weights)}-"}).status_code == 416
    head = httpx2.head(url)
    assert head.headers["X-Linked-Etag"] == f'"{sha256(weights)}"'
    assert int(head.headers["X-Linked-Size"]) == len(weights) == int(head.headers["Content-Length"])
    assert head.headers["X-Repo-Commit"] == published.oid


# ----------------------------------------------------------------------------- model card validation
def test_validate_yaml(hub, api, folder, monkeypatch):
    monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)  # ModelCard.validate has no endpoint argument
    ModelCard("---\nlicense: apache-2.0\nlanguage: [en, fr]\nbase_model: org/base\n---\n# ok\n").validate()
    bad_cards = {
        "license": "---\nlicense: not-a-license\n---\n",
        "datasets": "---\ndatasets: {a: 1}\n---\n",
        "language": "---\nlanguage: English\n---\n",
        "library_name": "---\nlibrary_name: [a, b]\n---\n",
        "base_model": "---\nbase_model: ../x\n---\n",
    }
    for needle, card in bad_cards.items():
        with pytest.raises(ValueError, match=needle):
            ModelCard(card).validate()
    # ModelCard() parses the YAML client-side; the commit path sends the raw README text, checked only by the server
    raw_cards = {
        "Invalid YAML": "---\ntags: [unclosed\n---\n",
        "mapping": "---\n- a\n- b\n---\n",
        "dataset must have": "---\nmodel-index:\n- name: m\n  results:\n  - task: {type: x}\n---\n",
    }
    for needle, card in raw_cards.items():
        with pytest.raises(ValueError, match=needle):
            api._validate_yaml(card)
    # upload_folder checks README.md before hashing or uploading anything
    api.create_repo(REPO)
    (folder / "README.md").write_text("---\npipeline_tag: not-a-task\n---\n")
    with pytest.raises(ValueError, match="pipeline_tag"):
        api.upload_folder(repo_id=REPO, folder_path=folder)
    assert hub.count("POST", "/preupload/") == 0
    with pytest.warns(UserWarning, match="empty or missing yaml metadata"):
        api._validate_yaml("# no metadata\n")


# ----------------------------------------------------------------------------- fault injection
def test_cached_file_needs_no_network(hub, published, tmp_path):
    cache = tmp_path / "cache"
    first = download(hub, "model.safetensors", "main", cache)  # also records main -> commit in the cache
    hub.reset_requests()
    assert download(hub, "model.safetensors", published.oid, cache) == first
    assert download(hub, "model.safetensors", "main", cache, local_files_only=True) == first
    assert hub.requests == []
    with pytest.raises(LocalEntryNotFoundError):
        download(hub, "config.json", "main", cache, local_files_only=True)
    assert hub.requests == []


def test_tampered_file_is_detectable(hub, api, folder, published, tmp_path):
    weights = (folder / "model.safetensors").read_bytes()
    hub.tamper("model.safetensors", times=1)
    local = download(hub, "model.safetensors", published.oid, tmp_path / "cache")
    body = local.read_bytes()
    assert len(body) == len(weights) and body != weights
    expected = {s.rfilename: s for s in api.model_info(REPO, files_metadata=True).siblings}["model.safetensors"]
    assert sha256(body) != expected.lfs.sha256
    # the fault was used up: a forced re-download is clean
    assert download(hub, "model.safetensors", published.oid, tmp_path / "cache", force_download=True).read_bytes() \
        == weights


def test_truncated_transfer_is_retried(hub, folder, published, tmp_path, monkeypatch):
    monkeypatch.setattr(file_download.time, "sleep", lambda seconds: None)  # skip the client's retry pause
    weights = (folder / "model.safetensors").read_bytes()
    hub.truncate("model.safetensors", keep=20, times=1)
    local = download(hub, "model.safetensors", published.oid, tmp_path / "cache")
    assert local.read_bytes() == weights
    # the cut-off response, then a retry (the client buffers 10 MB chunks, so it resumes from 0 here)
    assert hub.count("GET", "/resolve/") == 2


def test_truncated_transfer_that_never_completes_raises(hub, published, tmp_path, monkeypatch):
    monkeypatch.setattr(file_download.time, "sleep", lambda seconds: None)  # skip the client's retry pauses
    hub.truncate("model.safetensors", keep=0)
    with pytest.raises(httpx2.RemoteProtocolError):
        download(hub, "model.safetensors", published.oid, tmp_path / "cache")
    blobs = tmp_path / "cache" / f"models--{REPO.replace('/', '--')}" / "blobs"
    assert not [p for p in blobs.iterdir() if not p.name.endswith(".incomplete")]


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
