"""A loopback Hugging Face Hub on 127.0.0.1: the HTTP endpoints the zoo reaches through the real
``huggingface_hub`` client (``zoo.publish``/``zoo release`` uploads, ``zoo.load`` of catalog entries and
``hf://`` URIs; ``_HubHandler._route`` maps them), with fault hooks for the tests of the hub layer.

State lives in memory: model repos, commits with 40-hex ids (older commits stay readable), branches, regular
files (git blobs) and LFS files (uploaded through the LFS batch API, sha256 checked).

Faults: :meth:`HubServer.tamper`, ``truncate``, ``flip``, ``stall`` (downloads), ``delay``, ``fail`` (any
request), :attr:`HubServer.hide_hashes` (a mirror without per-file hashes), private repos and
:attr:`HubServer.token`. Every request is logged in :attr:`HubServer.requests`.

Tests get one per test from the ``hub`` fixture of tests/conftest.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["HubServer", "git_blob_sha1", "lfs_pointer"]

LFS_SIZE_THRESHOLD = 10 * 1024 * 1024  # the Hub takes regular (non-LFS) files below 10 MiB only
SAMPLE_SIZE = 512  # the client sends the first 512 bytes of each file to decide binary vs text
DEFAULT_NAMESPACE = "user"  # where a `create_repo("name")` without an organization lands
INITIAL_GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"  # in every new repo's first commit


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: what the Hub reports as ``blobId``/``oid`` and serves as ``ETag``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file stored in git in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _looks_binary(sample: bytes) -> bool:
    if b"\0" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start < len(sample) - 3  # a multi-byte character cut by the 512-byte sample is still text
    return False


@dataclass(frozen=True)
class FileEntry:
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def blob_id(self) -> str:
        """The git blob id of what git stores: the content, or the LFS pointer."""
        return git_blob_sha1(lfs_pointer(self.sha256, len(self.data)) if self.lfs else self.data)

    @property
    def oid(self) -> str:
        """The id the preupload endpoint compares against: sha256 for LFS files, git sha1 for regular ones."""
        return self.sha256 if self.lfs else self.blob_id

    def hashes(self) -> dict:
        """size, blob id and LFS info, as model_info (``blobs=true``) and paths-info report them."""
        out: dict = {"size": len(self.data)}
        if self.lfs:
            out["lfs"] = {"sha256": self.sha256, "oid": self.sha256, "size": len(self.data),
                          "pointerSize": len(lfs_pointer(self.sha256, len(self.data)))}
        return out


@dataclass(frozen=True)
class Commit:
    id: str
    files: dict[str, FileEntry]


@dataclass
class Repo:
    repo_id: str
    private: bool
    refs: dict[str, str] = field(default_factory=dict)  # branch -> commit id
    commits: dict[str, Commit] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)  # sha256 -> content, uploaded through LFS

    def resolve(self, revision: str) -> Commit:
        commit = self.commits.get(self.refs.get(revision, revision))
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")
        return commit


class HubError(Exception):
    """An error answer: status, message (JSON ``error``, also ``X-Error-Message``) and ``X-Error-Code``."""

    def __init__(self, status: int, message: str, *, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}


@dataclass
class _Fault:
    kind: str  # "tamper" | "truncate" | "flip" | "stall" (a downloaded file) | "delay" | "fail" (any request)
    path: str | None  # the file path in the repo (download faults) or a substring of the URL path (None: any)
    repo_id: str | None
    remaining: int | None  # None: until cleared
    value: float | int | tuple = 0

    def matches(self, url_path: str, repo_id: str | None, file_path: str | None) -> bool:
        if self.remaining == 0:
            return False
        if self.kind in ("tamper", "truncate", "flip", "stall"):
            return file_path == self.path and self.repo_id in (None, repo_id)
        return self.path is None or self.path in url_path


class HubServer:
    """In-memory Hub on ``127.0.0.1:<free port>``, between ``start()`` and ``close()``.

    Attributes:
        endpoint: ``http://127.0.0.1:PORT``; pass it as ``endpoint=`` to HfApi / hf_hub_download.
        requests: every request received, in order, as ``(method, unquoted URL path)`` (no query string).
        token: if set, writes (and reads of private repos) need ``Authorization: Bearer <token>``; if None, any
            bearer token will do.
        hide_hashes: a mirror that sends no per-file hashes: "info" drops size, blobId and lfs from model_info,
            "all" also from paths-info.
    """

    def __init__(self):
        self.token: str | None = None
        self.hide_hashes: str | None = None
        self.requests: list[tuple[str, str]] = []
        self.endpoint = ""
        self._repos: dict[str, Repo] = {}
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> HubServer:
        handler = type("BoundHubHandler", (_HubHandler,), {"hub": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    # -- request log
    def reset_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    def count(self, method: str | None = None, path_contains: str | None = None) -> int:
        """Number of logged requests, optionally only those with this method / containing this path fragment."""
        with self._lock:
            return sum(1 for m, p in self.requests
                       if method in (None, m) and (path_contains is None or path_contains in p))

    # -- faults (``times``: how many matching requests; None: until clear_faults)
    def tamper(self, path: str, *, repo_id: str | None = None, times: int | None = None) -> None:
        """Serve the file ``path`` from /resolve with every byte flipped: same length and headers, wrong bytes."""
        self._add_fault(_Fault("tamper", path, repo_id, times))

    def truncate(self, path: str, *, keep: int = 0, repo_id: str | None = None, times: int | None = None) -> None:
        """Send only the first ``keep`` body bytes of ``path`` (announcing the full Content-Length), then close."""
        self._add_fault(_Fault("truncate", path, repo_id, times, keep))

    def flip(self, path: str, *, offset: int, repo_id: str | None = None, times: int | None = None) -> None:
        """Serve ``path`` with the one byte at ``offset`` (negative: from the end) inverted; headers unchanged."""
        self._add_fault(_Fault("flip", path, repo_id, times, offset))

    def stall(self, path: str, *, after: int, seconds: float, repo_id: str | None = None,
              times: int | None = None) -> None:
        """Send the first ``after`` body bytes of ``path``, then hang ``seconds`` and close (kill tests)."""
        self._add_fault(_Fault("stall", path, repo_id, times, (after, seconds)))

    def delay(self, seconds: float, *, path_contains: str | None = None, times: int | None = None) -> None:
        """Sleep ``seconds`` before answering matching requests (concurrency and timeout tests)."""
        self._add_fault(_Fault("delay", path_contains, None, times, seconds))

    def fail(self, status: int, *, path_contains: str | None = None, times: int | None = 1) -> None:
        """Answer matching requests with ``status`` (e.g. 500, 503) and no side effect."""
        self._add_fault(_Fault("fail", path_contains, None, times, status))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _add_fault(self, fault: _Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def _take_fault(self, kind: str, url_path: str, repo_id=None, file_path=None) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.kind == kind and fault.matches(url_path, repo_id, file_path):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                    return fault
        return None

    # -- direct state access (seeding and assertions without HTTP)
    def create_repo(self, repo_id: str, *, private: bool = False) -> Repo:
        with self._lock:
            if repo_id not in self._repos:
                self._repos[repo_id] = Repo(repo_id, private)
                initial = {".gitattributes": FileEntry(INITIAL_GITATTRIBUTES, lfs=False)}
                self._new_commit(self._repos[repo_id], initial, "main")
            return self._repos[repo_id]

    def seed(self, repo_id: str, files: dict[str, bytes], *, branch: str = "main") -> str:
        """Commit ``files`` (path -> bytes; binary or large ones as LFS) to a branch; returns the commit id."""
        with self._lock:
            repo = self.create_repo(repo_id)
            tree = dict(repo.resolve(branch).files)
            for path, data in files.items():
                lfs = len(data) >= LFS_SIZE_THRESHOLD or _looks_binary(data[:SAMPLE_SIZE])
                tree[path] = FileEntry(bytes(data), lfs)
                if lfs:
                    repo.lfs_objects[tree[path].sha256] = tree[path].data
            return self._new_commit(repo, tree, branch).id

    def head(self, repo_id: str, revision: str = "main") -> str:
        """The commit id ``revision`` points to."""
        with self._lock:
            return self._repo(repo_id).resolve(revision).id

    def file_bytes(self, repo_id: str, path: str, revision: str = "main") -> bytes:
        with self._lock:
            return self._repo(repo_id).resolve(revision).files[path].data

    def _repo(self, repo_id: str, headers=None) -> Repo:
        """The repo; with ``headers``, a read that a private repo refuses without the token."""
        repo = self._repos.get(repo_id)
        if repo is None:
            raise HubError(404, "Repository not found", code="RepoNotFound")
        if headers is not None and repo.private and not self._authorized(headers):
            raise HubError(401, "Repository not found", code="RepoNotFound")
        return repo

    def _new_commit(self, repo: Repo, files: dict[str, FileEntry], branch: str) -> Commit:
        parent = repo.refs.get(branch, "")
        listing = "".join(f"{path} {entry.blob_id}\n" for path, entry in sorted(files.items()))
        commit = Commit(hashlib.sha1(f"{parent}\n{listing}{uuid.uuid4()}".encode()).hexdigest(), files)
        repo.commits[commit.id] = commit
        repo.refs[branch] = commit.id
        return commit

    def _authorized(self, headers) -> bool:
        auth = headers.get("Authorization", "")
        token = auth[len("Bearer "):].strip() if auth.startswith("Bearer ") else ""
        return bool(token) and self.token in (None, token)


class _Response(Exception):
    """Raised by a route to answer: status, body, headers."""

    def __init__(self, status: int, body: bytes | dict | list = b"", headers: dict | None = None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        self.status, self.body, self.headers = status, body, headers or {}


class _Sent(Exception):
    """The response was already written (a cut-off body): nothing more to send."""


class _HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    hub: HubServer  # set on the subclass bound to a server

    def log_message(self, format, *args):  # keep test output clean
        pass

    # -- plumbing
    def _dispatch(self) -> None:
        hub, method = self.hub, self.command
        split = urlsplit(self.path)
        self.url_path = unquote(split.path)
        self.query = parse_qs(split.query, keep_blank_values=True)
        self.body = self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the client never sends chunked
        with hub._lock:
            hub.requests.append((method, self.url_path))
        try:
            if fault := hub._take_fault("delay", self.url_path):
                time.sleep(fault.value)
            if fault := hub._take_fault("fail", self.url_path):
                raise HubError(int(fault.value), f"injected failure {int(fault.value)}")
            self._route(method, self.url_path.strip("/").split("/"))
            raise _Response(404, {"error": "Not Found"})
        except _Sent:
            pass
        except _Response as r:
            self._send(r.status, r.body, r.headers)
        except HubError as err:
            headers = {"X-Error-Message": err.message, **err.headers}
            if err.code:
                headers["X-Error-Code"] = err.code
            self._send(err.status, json.dumps({"error": err.message}).encode(),
                       {"Content-Type": "application/json; charset=utf-8", **headers})

    do_GET = do_HEAD = do_POST = do_PUT = _dispatch  # what BaseHTTPRequestHandler calls, per method

    def _send(self, status: int, body: bytes, headers: dict, *, content_length: int | None = None) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(body) if content_length is None else content_length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self) -> dict:
        return json.loads(self.body or b"{}")

    def _require_auth(self) -> None:
        if not self.hub._authorized(self.headers):
            raise HubError(401, "Invalid credentials in Authorization header")

    def _param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    # -- routing: a route answers by raising _Response or HubError; returning means no route (404)
    def _route(self, method: str, segments: list[str]) -> None:
        if segments == ["api", "repos", "create"] and method == "POST":
            self._create_repo()
        if segments == ["api", "validate-yaml"] and method == "POST":  # upload_folder's README.md check: the zoo
            # checks its own cards (zoo.card), so the Hub's metadata rules are not copied here
            raise _Response(200, {"errors": [], "warnings": []})
        if segments[:2] == ["api", "models"] and len(segments) >= 4:
            repo_id, action, rest = "/".join(segments[2:4]), segments[4:5], segments[5:]
            if method == "GET" and (action, len(rest)) in (([], 0), (["revision"], 1)):
                self._model_info(repo_id, rest[0] if rest else "main")
            if method == "POST" and len(rest) == 1:
                route = {"preupload": self._preupload, "commit": self._commit, "paths-info": self._paths_info}
                if action and action[0] in route:
                    route[action[0]](repo_id, rest[0])
        if len(segments) >= 5 and segments[1].endswith(".git") and segments[2:5] == ["info", "lfs", "objects"]:
            self._lfs(method, f"{segments[0]}/{segments[1][: -len('.git')]}", segments[5:])
        if len(segments) >= 5 and segments[2] == "resolve" and method in ("GET", "HEAD"):
            self._resolve("/".join(segments[:2]), segments[3], "/".join(segments[4:]))

    def _create_repo(self) -> None:
        self._require_auth()
        payload = self._json()
        repo_id = f"{payload.get('organization') or DEFAULT_NAMESPACE}/{payload.get('name')}"
        with self.hub._lock:
            exists = repo_id in self.hub._repos
            self.hub.create_repo(repo_id, private=bool(payload.get("private")))
        url = f"{self.hub.endpoint}/{repo_id}"
        if exists:  # create_repo(exist_ok=True) relies on the 409 and its url
            raise _Response(409, {"error": "You already created this model repo", "url": url})
        raise _Response(200, {"url": url, "name": repo_id})

    # -- metadata
    def _model_info(self, repo_id: str, revision: str) -> None:
        with self.hub._lock:
            repo = self.hub._repo(repo_id, self.headers)
            commit = repo.resolve(revision)
        blobs = (self._param("blobs") or "").lower() == "true" and not self.hub.hide_hashes
        siblings = [{"rfilename": path, **({"blobId": entry.blob_id, **entry.hashes()} if blobs else {})}
                    for path, entry in sorted(commit.files.items())]
        raise _Response(200, {"id": repo_id, "modelId": repo_id, "sha": commit.id, "private": repo.private,
                              "tags": [], "siblings": siblings})

    def _paths_info(self, repo_id: str, revision: str) -> None:
        paths = parse_qs(self.body.decode(), keep_blank_values=True).get("paths", [])
        with self.hub._lock:
            commit = self.hub._repo(repo_id, self.headers).resolve(revision)
        entries = []
        for path in (p.strip("/") for p in paths):
            if path in commit.files:
                file = commit.files[path]
                if self.hub.hide_hashes == "all":
                    entries.append({"type": "file", "path": path, "oid": None, "size": len(file.data)})
                else:
                    entries.append({"type": "file", "path": path, "oid": file.blob_id, **file.hashes()})
        raise _Response(200, entries)

    # -- downloads (no Range: a resuming client gets the whole file again, which huggingface_hub handles)
    def _resolve(self, repo_id: str, revision: str, path: str) -> None:
        hub = self.hub
        with hub._lock:
            commit = hub._repo(repo_id, self.headers).resolve(revision)
        entry = commit.files.get(path)
        if entry is None:
            raise HubError(404, "Entry not found", code="EntryNotFound", headers={"X-Repo-Commit": commit.id})
        size = len(entry.data)
        headers = {"X-Repo-Commit": commit.id, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream",
                   "ETag": f'"{entry.oid}"'}
        if entry.lfs:
            headers.update({"X-Linked-Etag": f'"{entry.sha256}"', "X-Linked-Size": str(size)})
        body = entry.data
        if self.command == "GET":
            if hub._take_fault("tamper", self.url_path, repo_id, path):
                body = bytes(b ^ 0xFF for b in body)
            if fault := hub._take_fault("flip", self.url_path, repo_id, path):
                flipped = bytearray(body)
                flipped[int(fault.value)] ^= 0xFF
                body = bytes(flipped)
            cut = hub._take_fault("stall", self.url_path, repo_id, path) or \
                hub._take_fault("truncate", self.url_path, repo_id, path)
            if cut is not None:
                keep, seconds = cut.value if cut.kind == "stall" else (cut.value, 0)
                self.close_connection = True
                self._send(200, body[:keep], {**headers, "Connection": "close"}, content_length=len(body))
                self.wfile.flush()
                time.sleep(seconds)
                raise _Sent()
        raise _Response(200, body, headers)

    # -- uploads
    def _preupload(self, repo_id: str, revision: str) -> None:
        self._require_auth()
        with self.hub._lock:
            commit = self.hub._repo(repo_id).resolve(revision)
        files = []
        for item in self._json().get("files", []):
            path, size = item["path"], item["size"]
            lfs = size >= LFS_SIZE_THRESHOLD or _looks_binary(base64.b64decode(item.get("sample") or ""))
            existing = commit.files.get(path)
            files.append({"path": path, "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False,
                          "oid": existing.oid if existing is not None else None})
        raise _Response(200, {"files": files, "commitOid": commit.id})

    def _lfs(self, method: str, repo_id: str, rest: list[str]) -> None:
        hub = self.hub
        if method != "PUT":  # the real upload href is pre-signed (like an S3 URL): the client sends no token to it
            self._require_auth()
        with hub._lock:
            repo = hub._repo(repo_id)
        lfs_headers = {"Content-Type": "application/vnd.git-lfs+json"}
        base = f"{hub.endpoint}/{repo_id}.git/info/lfs/objects"
        if rest == ["batch"] and method == "POST":
            objects = [{"oid": obj["oid"], "size": obj["size"], "authenticated": True, "actions": {
                "upload": {"href": f"{base}/{obj['oid']}"}, "verify": {"href": f"{base}/verify"}}}
                for obj in self._json().get("objects", [])]
            raise _Response(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"}, lfs_headers)
        if rest == ["verify"] and method == "POST":
            oid = self._json().get("oid")
            with hub._lock:
                stored = repo.lfs_objects.get(oid)
            if stored is None:
                raise HubError(404, f"LFS object {oid} is not stored")
            raise _Response(200, {"oid": oid, "size": len(stored)}, lfs_headers)
        if len(rest) == 1 and method == "PUT":
            oid = rest[0]
            if hashlib.sha256(self.body).hexdigest() != oid:
                raise HubError(400, f"uploaded content does not match its sha256 {oid}")
            with hub._lock:
                repo.lfs_objects[oid] = self.body
            raise _Response(200, b"")

    def _commit(self, repo_id: str, branch: str) -> None:
        self._require_auth()
        items = [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]
        with self.hub._lock:
            repo = self.hub._repo(repo_id)
            tree = dict(repo.resolve(branch).files)
            for item in items[1:]:  # items[0] is the commit header
                key, value = item.get("key"), item.get("value") or {}
                if key == "file":
                    tree[value["path"]] = FileEntry(base64.b64decode(value.get("content") or ""), lfs=False)
                elif key == "lfsFile" and value.get("oid") in repo.lfs_objects:
                    tree[value["path"]] = FileEntry(repo.lfs_objects[value["oid"]], lfs=True)
                elif key == "lfsFile":
                    raise HubError(422, f"{value.get('path')}: LFS object {value.get('oid')} was never uploaded")
                else:
                    raise HubError(400, f"commit operation {key!r} is not served here")
            commit = self.hub._new_commit(repo, tree, branch)
        raise _Response(200, {"success": True, "commitOid": commit.id, "hookOutput": "",
                              "commitUrl": f"{self.hub.endpoint}/{repo_id}/commit/{commit.id}"})
