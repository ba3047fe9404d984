"""A loopback Hugging Face Hub: the HTTP endpoints the real ``huggingface_hub`` client uses for repos, on 127.0.0.1.

The Hub cannot be reached from the test machines, so the hub layer is tested against this server. It keeps real
git-like state in memory: every commit gets a 40-hex id (the sha1 of a git commit object over a git tree hash),
branches move, older commits stay readable, regular files are git blobs and large/binary files go through the LFS
batch API (basic transfer, sha256 + size verified on upload).

Endpoints (``{repo}`` is ``user/name``, prefixed by ``datasets/`` or ``spaces/`` outside /api for those types):

* ``POST /api/repos/create`` (409 + ``url`` when it exists), ``DELETE /api/repos/delete``
* ``POST /api/{type}s/{repo}/preupload/{rev}`` -> upload mode (lfs/regular), shouldIgnore, remote oid
* ``POST /{repo}.git/info/lfs/objects/batch``, ``PUT /{repo}.git/info/lfs/objects/{oid}`` (the upload href),
  ``POST /{repo}.git/info/lfs/objects/verify``
* ``POST /api/{type}s/{repo}/commit/{rev}`` (NDJSON: header, file, lfsFile, deletedFile, deletedFolder; create_pr)
* ``GET /api/{type}s/{repo}[/revision/{rev}]`` (``blobs=True`` -> size, blobId, lfs), ``.../tree/{rev}[/{path}]``
  (recursive, expand, cursor pagination), ``POST .../paths-info/{rev}``, ``GET .../refs``, ``GET .../commits/{rev}``
* ``GET|HEAD /{repo}/resolve/{rev}/{path}`` with X-Repo-Commit, ETag / X-Linked-Etag / X-Linked-Size, Range
* ``POST /api/validate-yaml`` (YAML parse + the Hub's metadata type checks)

Fault injection (for tests of the layer above): :meth:`HubServer.tamper`, :meth:`HubServer.truncate`,
:meth:`HubServer.delay`, :meth:`HubServer.fail`; every request is logged in :attr:`HubServer.requests`.

Usage::

    with hub_server() as hub:
        HfApi(endpoint=hub.endpoint, token="dummy").create_repo("user/model")
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import hashlib
import hmac
import json
import re
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

import yaml

__all__ = ["HubServer", "HubError", "RequestRecord", "hub_server", "hf_hub_server", "git_blob_sha1", "lfs_pointer"]

# ----------------------------------------------------------------------------- Hub rules (facts about the Hub)
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024  # the Hub rejects regular (non-LFS) files of 10 MiB or more
SAMPLE_SIZE = 512  # the client sends the first 512 bytes of each file to decide binary vs text
TREE_PAGE_SIZE, TREE_PAGE_SIZE_EXPANDED = 1000, 50
DEFAULT_NAMESPACE = "user"  # the namespace a token-less `create_repo("name")` lands in

# The .gitattributes the Hub puts in the initial commit of every new repo.
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in (
        "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
        "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
        "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
        "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
    )
)

KNOWN_LICENSES = frozenset(
    "apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0 "
    "bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc "
    "cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 "
    "cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 "
    "cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 "
    "eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc h-research intel-research lppl-1.3c "
    "ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib "
    "pddl lgpl-lr deepfloyd-if-license fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 "
    "llama3.3 llama4 gemma unknown other".split()
)

KNOWN_PIPELINE_TAGS = frozenset(
    "text-classification token-classification table-question-answering question-answering zero-shot-classification "
    "translation summarization feature-extraction text-generation fill-mask sentence-similarity text-to-speech "
    "text-to-audio automatic-speech-recognition audio-to-audio audio-classification voice-activity-detection "
    "depth-estimation image-classification object-detection image-segmentation text-to-image image-to-text "
    "image-to-image image-to-video unconditional-image-generation video-classification reinforcement-learning "
    "robotics tabular-classification tabular-regression tabular-to-text table-to-text multiple-choice "
    "text-ranking text-retrieval time-series-forecasting text-to-video image-text-to-text visual-question-answering "
    "document-question-answering zero-shot-image-classification graph-ml mask-generation "
    "zero-shot-object-detection text-to-3d image-to-3d image-feature-extraction video-text-to-text "
    "keypoint-detection visual-document-retrieval any-to-any video-to-video other".split()
)

_REPO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_REPO_ID = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$")
_LANGUAGE = re.compile(r"^([a-z]{2,3}([-_][A-Za-z0-9]{2,8})*|code|multilingual)$")
_YAML_BLOCK = re.compile(r"^\s*---(?:\r\n|\r|\n)([\S\s]*?)(?:\r\n|\r|\n)---[ \t]*(?:\r\n|\n|$)")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
_PLURAL = {"models": "model", "datasets": "dataset", "spaces": "space"}
_REPO_SUBROUTES = {"revision", "tree", "preupload", "commit", "paths-info", "refs", "commits"}


# ----------------------------------------------------------------------------- git objects
def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: what the Hub reports as ``blobId``/``oid`` and serves as ``ETag``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file stored in git in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass(frozen=True)
class FileEntry:
    data: bytes
    lfs: bool

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def git_bytes(self) -> bytes:
        """What git stores for this path: the content, or the LFS pointer."""
        return lfs_pointer(self.sha256, self.size) if self.lfs else self.data

    @property
    def blob_id(self) -> str:
        return git_blob_sha1(self.git_bytes)

    @property
    def oid(self) -> str:
        """The id the preupload endpoint compares against: sha256 for LFS files, git sha1 for regular ones."""
        return self.sha256 if self.lfs else self.blob_id

    def tree_json(self, path: str) -> dict:
        info = {"type": "file", "oid": self.blob_id, "size": self.size, "path": path}
        if self.lfs:
            info["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": len(self.git_bytes)}
        return info


def _git_tree_ids(files: dict[str, FileEntry]) -> dict[str, str]:
    """Git tree ids of the root ("") and of every folder, computed the way git does."""
    children: dict[str, dict[str, tuple[str, str]]] = {"": {}}
    for path in files:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            children.setdefault("/".join(parts[:depth]), {})
    ids: dict[str, str] = {}

    def tree_id(folder: str) -> str:
        entries = []
        prefix = f"{folder}/" if folder else ""
        for path, entry in files.items():
            if path.startswith(prefix) and "/" not in path[len(prefix):]:
                entries.append((path[len(prefix):], b"100644", bytes.fromhex(entry.blob_id)))
        for sub in children:
            if sub and sub.startswith(prefix) and "/" not in sub[len(prefix):]:
                entries.append((sub[len(prefix):], b"40000", bytes.fromhex(tree_id(sub))))
        # git orders entries by name, folders compared as if they ended with "/"
        entries.sort(key=lambda e: e[0].encode() + (b"/" if e[1] == b"40000" else b""))
        body = b"".join(mode + b" " + name.encode() + b"\0" + sha for name, mode, sha in entries)
        ids[folder] = hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()
        return ids[folder]

    tree_id("")
    return ids


@dataclass(frozen=True)
class Commit:
    id: str
    parent: str | None
    files: dict[str, FileEntry]
    title: str
    message: str
    date: str
    tree_ids: dict[str, str]


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    created_at: str
    refs: dict[str, str] = field(default_factory=dict)  # branch or "refs/pr/N" -> commit id
    commits: dict[str, Commit] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)  # sha256 -> content, uploaded through LFS
    uid: str = field(default_factory=lambda: uuid.uuid4().hex[:24])

    def resolve(self, revision: str) -> Commit:
        if revision in self.refs:
            return self.commits[self.refs[revision]]
        if revision in self.commits:
            return self.commits[revision]
        if re.fullmatch(r"[0-9a-f]{7,39}", revision):
            matches = [c for cid, c in self.commits.items() if cid.startswith(revision)]
            if len(matches) == 1:
                return matches[0]
        raise HubError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")

    def history(self, commit: Commit) -> list[Commit]:
        chain = [commit]
        while chain[-1].parent is not None:
            chain.append(self.commits[chain[-1].parent])
        return chain


class HubError(Exception):
    """An error answer: status, message (JSON ``error``, also ``X-Error-Message``) and ``X-Error-Code``."""

    def __init__(self, status: int, message: str, *, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _gitattributes_lfs(files: dict[str, FileEntry], path: str) -> bool:
    """Whether the .gitattributes of a tree routes ``path`` through LFS (last matching line wins, like git)."""
    entry = files.get(".gitattributes")
    if entry is None:
        return False
    lfs = False
    for line in entry.data.decode("utf-8", "replace").splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        pattern, attrs = parts[0], parts[1:]
        target = path if "/" in pattern.strip("/") else path.rsplit("/", 1)[-1]
        if fnmatch.fnmatchcase(target, pattern.strip("/")):
            if "filter=lfs" in attrs:
                lfs = True
            elif "-filter" in attrs or "!filter" in attrs or any(a.startswith("filter=") for a in attrs):
                lfs = False
    return lfs


def _gitignored(gitignore: str | None, path: str) -> bool:
    if not gitignore:
        return False
    ignored = False
    for line in gitignore.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        anchored = "/" in pattern.rstrip("/")
        pattern = pattern.strip("/")
        parts = path.split("/")
        candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)] if anchored else parts
        if any(fnmatch.fnmatchcase(c, pattern) for c in candidates):
            ignored = not negate
    return ignored


def _looks_binary(sample: bytes) -> bool:
    if b"\0" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start < len(sample) - 3  # a multi-byte character cut by the 512-byte sample is still text
    return False


def _safetensors_parameters(data: bytes) -> dict[str, int] | None:
    """Parameter count per dtype from a safetensors header (what the Hub reports as ``safetensors``)."""
    if len(data) < 8:
        return None
    (header_len,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + header_len])
    except ValueError:
        return None
    counts: dict[str, int] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        n = 1
        for dim in info["shape"]:
            n *= dim
        counts[info["dtype"]] = counts.get(info["dtype"], 0) + n
    return counts


def _card_metadata(text: str) -> dict | None:
    match = _YAML_BLOCK.search(text)
    if not match:
        return None
    data = yaml.safe_load(match.group(1))
    return data if isinstance(data, dict) else None


# ----------------------------------------------------------------------------- model card validation
def _str_or_list_of_str(value) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def validate_card_metadata(content: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a README.md, following the Hub's model-card metadata rules."""
    match = _YAML_BLOCK.search(content)
    if not match or not match.group(1).strip():
        return [], ["empty or missing yaml metadata in repo card"]
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as err:
        return [f"Invalid YAML in README.md metadata: {err}"], []
    if data is None:
        return [], ["empty or missing yaml metadata in repo card"]
    if not isinstance(data, dict):
        return [f"YAML metadata must be a mapping of keys to values, got {type(data).__name__}"], []
    errors = []
    for key in ("tags", "datasets", "metrics", "language", "license", "base_model"):
        if key in data and not _str_or_list_of_str(data[key]):
            errors.append(f'"{key}" must be a string or an array of strings')
    for key in ("library_name", "pipeline_tag", "license_name", "license_link", "thumbnail"):
        if key in data and not isinstance(data[key], str):
            errors.append(f'"{key}" must be a string')
    if isinstance(data.get("license"), str) and data["license"] not in KNOWN_LICENSES:
        errors.append(f'"license" must be one of the Hub license identifiers (got "{data["license"]}")')
    if isinstance(data.get("pipeline_tag"), str) and data["pipeline_tag"] not in KNOWN_PIPELINE_TAGS:
        errors.append(f'"pipeline_tag" must be a known task (got "{data["pipeline_tag"]}")')
    languages = data.get("language")
    for lang in [languages] if isinstance(languages, str) else languages if isinstance(languages, list) else []:
        if isinstance(lang, str) and not _LANGUAGE.fullmatch(lang):
            errors.append(f'"language" must be ISO 639 codes (got "{lang}")')
    base = data.get("base_model")
    for repo in [base] if isinstance(base, str) else base if isinstance(base, list) else []:
        if isinstance(repo, str) and (not _REPO_ID.fullmatch(repo) or "--" in repo or ".." in repo):
            errors.append(f'"base_model" must be a model id like "namespace/name" (got "{repo}")')
    if "model-index" in data:
        errors.extend(_model_index_errors(data["model-index"]))
    return errors, []


def _model_index_errors(index) -> list[str]:
    if not isinstance(index, list):
        return ['"model-index" must be an array']
    errors = []
    for i, model in enumerate(index):
        where = f'"model-index[{i}]"'
        if not isinstance(model, dict) or not isinstance(model.get("name"), str):
            errors.append(f'{where} must be an object with a string "name"')
            continue
        results = model.get("results")
        if not isinstance(results, list):
            errors.append(f'{where}.results must be an array')
            continue
        for j, result in enumerate(results):
            at = f"{where}.results[{j}]"
            if not isinstance(result, dict):
                errors.append(f"{at} must be an object")
                continue
            task, dataset, metrics = result.get("task"), result.get("dataset"), result.get("metrics")
            if not isinstance(task, dict) or not isinstance(task.get("type"), str):
                errors.append(f'{at}.task.type must be a string')
            if not isinstance(dataset, dict) or not all(isinstance(dataset.get(k), str) for k in ("type", "name")):
                errors.append(f'{at}.dataset must have string "type" and "name"')
            if not isinstance(metrics, list) or not all(
                isinstance(m, dict) and isinstance(m.get("type"), str) and "value" in m for m in metrics
            ):
                errors.append(f'{at}.metrics must be an array of objects with a string "type" and a "value"')
    return errors


# ----------------------------------------------------------------------------- fault injection
@dataclass
class _Fault:
    kind: str  # "tamper" | "truncate" | "flip" | "stall" | "delay" | "fail"
    method: str | None
    path: str | None  # exact file path in repo (tamper/truncate) or substring of the URL path (delay/fail)
    repo_id: str | None
    remaining: int | None  # None: forever
    value: float | int | tuple = 0

    def matches(self, method: str, url_path: str, repo_id: str | None = None, file_path: str | None = None) -> bool:
        if self.remaining == 0 or (self.method and self.method != method):
            return False
        if self.kind in ("tamper", "truncate", "flip", "stall"):
            return file_path == self.path and (self.repo_id is None or self.repo_id == repo_id)
        return self.path is None or self.path in url_path


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str  # unquoted, without the query string
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased


# ----------------------------------------------------------------------------- server
class HubServer:
    """In-memory Hub on ``127.0.0.1:<free port>``. Start with :func:`hub_server` (or ``start()``/``close()``).

    Attributes:
        endpoint: ``http://127.0.0.1:PORT``; pass it as ``endpoint=`` to HfApi / hf_hub_download / snapshot_download.
        requests: every request received, in order, as ``(method, unquoted URL path)`` (no query string).
        request_log: the same requests as :class:`RequestRecord` (method, path, query, headers).
        in_flight, peak_in_flight: requests being answered now / the most ever answered at once.
        token: if set, write calls (and reads of private repos) need ``Authorization: Bearer <token>``; if None,
            any bearer token is accepted for writes.
    """

    def __init__(self, *, token: str | None = None):
        self.token = token
        # a mirror that sends no per-file hashes: "info" drops size/blobId/lfs from model_info, "all" also from
        # tree and paths-info listings
        self.hide_hashes: str | None = None
        self.requests: list[tuple[str, str]] = []
        self.request_log: list[RequestRecord] = []
        self.in_flight = 0  # requests being handled right now
        self.peak_in_flight = 0  # the most requests ever handled at the same time
        self._repos: dict[tuple[str, str], Repo] = {}
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""
        self._secret = uuid.uuid4().bytes

    # -- lifecycle
    def start(self) -> HubServer:
        handler = type("BoundHubHandler", (_HubHandler,), {"hub": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="hubserver",
                                        daemon=True)
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
            self.request_log.clear()

    def count(self, method: str | None = None, path_contains: str | None = None) -> int:
        """Number of logged requests, optionally only those with this method / containing this path fragment."""
        with self._lock:
            return sum(
                1 for m, p in self.requests
                if (method is None or m == method) and (path_contains is None or path_contains in p)
            )

    # -- fault injection
    def tamper(self, path: str, *, repo_id: str | None = None, times: int | None = None) -> None:
        """Serve ``path`` (a file in the repo) from /resolve with every byte flipped: same length, wrong content.
        Headers (ETag, sizes) stay those of the real file. ``times``: how many responses (None: until cleared)."""
        self._add_fault(_Fault("tamper", "GET", path, repo_id, times))

    def truncate(self, path: str, *, keep: int = 0, repo_id: str | None = None, times: int | None = None) -> None:
        """Send only the first ``keep`` body bytes of ``path`` (announcing the full Content-Length), then close."""
        self._add_fault(_Fault("truncate", "GET", path, repo_id, times, keep))

    def flip(self, path: str, *, offset: int, repo_id: str | None = None, times: int | None = None) -> None:
        """Serve ``path`` with the one byte at ``offset`` (negative: from the end) inverted; headers unchanged."""
        self._add_fault(_Fault("flip", "GET", path, repo_id, times, offset))

    def stall(self, path: str, *, after: int, seconds: float, repo_id: str | None = None,
              times: int | None = None) -> None:
        """Send the first ``after`` body bytes of ``path``, then hang ``seconds`` before the rest (kill tests)."""
        self._add_fault(_Fault("stall", "GET", path, repo_id, times, (after, seconds)))

    def delay(self, seconds: float, *, method: str | None = None, path_contains: str | None = None,
              times: int | None = None) -> None:
        """Sleep ``seconds`` before answering matching requests (for concurrency/timeout tests)."""
        self._add_fault(_Fault("delay", method, path_contains, None, times, seconds))

    def fail(self, status: int, *, method: str | None = None, path_contains: str | None = None,
             times: int | None = 1) -> None:
        """Answer matching requests with ``status`` (e.g. 500, 503) and no side effect."""
        self._add_fault(_Fault("fail", method, path_contains, None, times, status))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _add_fault(self, fault: _Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def _take_fault(self, kind: str, method: str, url_path: str, repo_id=None, file_path=None) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.kind == kind and fault.matches(method, url_path, repo_id, file_path):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                    return fault
        return None

    # -- direct state access (seeding and assertions without going through HTTP)
    def create_repo(self, repo_id: str, *, repo_type: str = "model", private: bool = False) -> Repo:
        with self._lock:
            key = (repo_type, repo_id)
            if key in self._repos:
                return self._repos[key]
            repo = Repo(repo_type, repo_id, private, _now())
            self._repos[key] = repo
            initial = {".gitattributes": FileEntry(DEFAULT_GITATTRIBUTES.encode(), lfs=False)}
            self._new_commit(repo, None, initial, "initial commit", "", "main")
            return repo

    def seed(self, repo_id: str, files: dict[str, bytes], *, message: str = "seed", branch: str = "main",
             repo_type: str = "model") -> str:
        """Commit ``files`` (path -> bytes; LFS decided like the Hub does) to a branch; returns the commit id."""
        with self._lock:
            repo = self.create_repo(repo_id, repo_type=repo_type)
            parent = repo.resolve(branch)
            tree = dict(parent.files)
            for path, data in files.items():
                lfs = _gitattributes_lfs(tree, path) or len(data) >= LFS_SIZE_THRESHOLD or _looks_binary(data[:SAMPLE_SIZE])
                tree[path] = FileEntry(bytes(data), lfs)
                if lfs:
                    repo.lfs_objects[tree[path].sha256] = tree[path].data
            return self._new_commit(repo, parent.id, tree, message, "", branch).id

    def head(self, repo_id: str, revision: str = "main", *, repo_type: str = "model") -> str:
        """The commit id ``revision`` points to."""
        with self._lock:
            return self._repo(repo_type, repo_id).resolve(revision).id

    def file_bytes(self, repo_id: str, path: str, revision: str = "main", *, repo_type: str = "model") -> bytes:
        with self._lock:
            return self._repo(repo_type, repo_id).resolve(revision).files[path].data

    def _repo(self, repo_type: str, repo_id: str) -> Repo:
        repo = self._repos.get((repo_type, repo_id))
        if repo is None:
            raise HubError(404, "Repository not found", code="RepoNotFound")
        return repo

    def _new_commit(self, repo: Repo, parent: str | None, files: dict[str, FileEntry], title: str,
                    description: str, ref: str) -> Commit:
        tree_ids = _git_tree_ids(files)
        stamp = int(time.time())
        message = title + (f"\n\n{description}" if description else "")
        body = f"tree {tree_ids['']}\n" + (f"parent {parent}\n" if parent else "")
        body += f"author hub <hub@127.0.0.1> {stamp} +0000\ncommitter hub <hub@127.0.0.1> {stamp} +0000\n\n{message}\n"
        raw = body.encode()
        commit_id = hashlib.sha1(b"commit %d\0" % len(raw) + raw).hexdigest()
        commit = Commit(commit_id, parent, files, title, message, _now(), tree_ids)
        repo.commits[commit_id] = commit
        repo.refs[ref] = commit_id
        return commit

    def _sign(self, repo: Repo, oid: str, size: int) -> str:
        """Signature of a pre-signed LFS upload URL (bound to repo, object and size)."""
        message = f"{repo.repo_type}/{repo.repo_id}/{oid}/{size}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def _authorized(self, headers) -> bool:
        auth = headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return False
        return self.token is None or auth[7:].strip() == self.token

    def _readable_repo(self, repo_type: str, repo_id: str, headers) -> Repo:
        repo = self._repo(repo_type, repo_id)
        if repo.private and not self._authorized(headers):
            raise HubError(401, "Repository not found", code="RepoNotFound")
        return repo

    def _repo_url(self, repo: Repo) -> str:
        return f"{self.endpoint}/{_URL_PREFIX[repo.repo_type]}{repo.repo_id}"


@contextlib.contextmanager
def hub_server(*, token: str | None = None):
    """Run a :class:`HubServer` for the duration of the ``with`` block; yields it (see its attributes)."""
    server = HubServer(token=token).start()
    try:
        yield server
    finally:
        server.close()


try:  # the pytest fixture, for conftest.py to re-export: `from hubserver import hf_hub_server`
    import pytest

    @pytest.fixture
    def hf_hub_server():
        """A fresh loopback Hub per test (a :class:`HubServer`)."""
        with hub_server() as server:
            yield server
except ImportError:  # used outside pytest
    pass


# ----------------------------------------------------------------------------- HTTP handler
class _Response(Exception):
    """Raised by a route to answer: status, body, headers."""

    def __init__(self, status: int, body: bytes | dict | list = b"", headers: dict | None = None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        self.status, self.body, self.headers = status, body, headers or {}


class _HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    hub: HubServer  # set on the subclass bound to a server

    def log_message(self, format, *args):  # keep test output clean
        pass

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    # -- plumbing
    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _dispatch(self, method: str) -> None:
        hub = self.hub
        split = urlsplit(self.path)
        self.url_path, self.query = split.path, parse_qs(split.query, keep_blank_values=True)
        self.body = self._read_body()
        self.method = method
        with hub._lock:
            hub.requests.append((method, unquote(self.url_path)))
            hub.request_log.append(RequestRecord(method, unquote(self.url_path), self.query,
                                                 {k.lower(): v for k, v in self.headers.items()}))
            hub.in_flight += 1
            hub.peak_in_flight = max(hub.peak_in_flight, hub.in_flight)
        try:
            self._answer(method)
        finally:
            with hub._lock:
                hub.in_flight -= 1

    def _answer(self, method: str) -> None:
        hub = self.hub
        if fault := hub._take_fault("delay", method, unquote(self.url_path)):
            time.sleep(fault.value)
        try:
            if fault := hub._take_fault("fail", method, unquote(self.url_path)):
                raise HubError(int(fault.value), f"injected failure {int(fault.value)}")
            self._route(method)
            raise _Response(404, {"error": "Not Found"})
        except _Sent:
            pass
        except _Response as r:
            self._send(r.status, r.body, r.headers)
        except HubError as err:
            headers = {"X-Error-Message": err.message, **err.headers}
            if err.code:
                headers["X-Error-Code"] = err.code
            body = json.dumps({"error": err.message}).encode()
            self._send(err.status, body, {"Content-Type": "application/json; charset=utf-8", **headers})

    def _send(self, status: int, body: bytes, headers: dict, *, content_length: int | None = None) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(body) if content_length is None else content_length))
        self.end_headers()
        if self.method != "HEAD":
            self.wfile.write(body)

    def _json(self) -> dict:
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            raise HubError(400, "Request body is not valid JSON") from None

    def _require_auth(self) -> None:
        if not self.hub._authorized(self.headers):
            raise HubError(401, "Invalid credentials in Authorization header")

    def _param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def _flag(self, name: str) -> bool:
        return (self._param(name) or "").lower() in ("1", "true", "yes")

    # -- routing
    def _route(self, method: str) -> None:
        """Find the handler. Handlers answer by raising _Response or HubError; returning means no route (404)."""
        segments = self.url_path.strip("/").split("/")
        if segments[0] == "api":
            self._route_api(method, segments[1:])
        repo_type = "model"
        if segments[0] in ("datasets", "spaces"):
            repo_type, segments = _PLURAL[segments[0]], segments[1:]
        git = next((i for i, s in enumerate(segments) if s.endswith(".git")), None)
        if git is not None and segments[git + 1 : git + 4] == ["info", "lfs", "objects"]:
            repo_id = unquote("/".join(segments[: git + 1]))[: -len(".git")]
            self._route_lfs(method, repo_type, repo_id, segments[git + 4 :])
        if "resolve" in segments[1:3] and method in ("GET", "HEAD"):
            at = segments.index("resolve", 1)
            repo_id = unquote("/".join(segments[:at]))
            if len(segments) < at + 3:
                raise HubError(400, "resolve needs a revision and a path")
            self._resolve(repo_type, repo_id, unquote(segments[at + 1]), unquote("/".join(segments[at + 2 :])))

    def _route_api(self, method: str, segments: list[str]) -> None:
        if segments == ["repos", "create"] and method == "POST":
            self._create_repo()
        if segments == ["repos", "delete"] and method == "DELETE":
            self._delete_repo()
        if segments == ["validate-yaml"] and method == "POST":
            self._validate_yaml()
        if len(segments) < 2 or segments[0] not in _PLURAL:
            return
        repo_type, rest = _PLURAL[segments[0]], segments[1:]
        if len(rest) >= 2 and rest[1] not in _REPO_SUBROUTES:
            repo_id, rest = f"{rest[0]}/{rest[1]}", rest[2:]
        else:
            repo_id, rest = rest[0], rest[1:]
        repo_id = unquote(repo_id)
        action = rest[0] if rest else None
        revision = unquote(rest[1]) if len(rest) > 1 else "main"
        tail = unquote("/".join(rest[2:]))
        if action is None and method == "GET":
            self._repo_info(repo_type, repo_id, "main")
        if action == "revision" and method == "GET":
            self._repo_info(repo_type, repo_id, revision)
        if action == "tree" and method == "GET":
            self._tree(repo_type, repo_id, revision, tail)
        if action == "paths-info" and method == "POST":
            self._paths_info(repo_type, repo_id, revision)
        if action == "preupload" and method == "POST":
            self._preupload(repo_type, repo_id, revision)
        if action == "commit" and method == "POST":
            self._commit(repo_type, repo_id, revision)
        if action == "refs" and method == "GET":
            self._refs(repo_type, repo_id)
        if action == "commits" and method == "GET":
            self._commits(repo_type, repo_id, revision)

    # -- repos
    def _create_repo(self) -> None:
        self._require_auth()
        payload = self._json()
        name, organization = payload.get("name"), payload.get("organization")
        repo_type = payload.get("type") or "model"
        if repo_type not in _URL_PREFIX:
            raise HubError(400, f"Invalid repo type: {repo_type}")
        if not isinstance(name, str) or not _REPO_NAME.fullmatch(name) or "--" in name or ".." in name:
            raise HubError(400, f"Invalid repo name {name!r}: use letters, digits, '-', '_', '.' (max 96 chars)")
        repo_id = f"{organization or DEFAULT_NAMESPACE}/{name}"
        hub = self.hub
        with hub._lock:
            exists = (repo_type, repo_id) in hub._repos
            repo = hub.create_repo(repo_id, repo_type=repo_type, private=payload.get("visibility") == "private"
                                   or bool(payload.get("private")))
        url = hub._repo_url(repo)
        if exists:
            raise _Response(409, {"error": f"You already created this {repo_type} repo", "url": url})
        raise _Response(200, {"url": url, "name": repo_id, "id": repo.uid})

    def _delete_repo(self) -> None:
        self._require_auth()
        payload = self._json()
        repo_id = f"{payload.get('organization') or DEFAULT_NAMESPACE}/{payload.get('name')}"
        with self.hub._lock:
            self.hub._repo(payload.get("type") or "model", repo_id)
            del self.hub._repos[(payload.get("type") or "model", repo_id)]
        raise _Response(200, b"")

    def _repo_info(self, repo_type: str, repo_id: str, revision: str) -> None:
        hub = self.hub
        with hub._lock:
            repo = hub._readable_repo(repo_type, repo_id, self.headers)
            commit = repo.resolve(revision)
        blobs = self._flag("blobs")
        siblings = []
        for path in sorted(commit.files):
            entry = commit.files[path]
            sibling: dict = {"rfilename": path}
            if blobs and not hub.hide_hashes:
                sibling.update(size=entry.size, blobId=entry.blob_id)
                if entry.lfs:
                    sibling["lfs"] = {"sha256": entry.sha256, "size": entry.size,
                                      "pointerSize": len(entry.git_bytes)}
            siblings.append(sibling)
        info: dict = {
            "_id": repo.uid, "id": repo_id, "author": repo_id.split("/")[0] if "/" in repo_id else None,
            "sha": commit.id, "lastModified": commit.date, "createdAt": repo.created_at, "private": repo.private,
            "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
            "usedStorage": sum(len(v) for v in repo.lfs_objects.values()),
        }
        if repo_type == "model":
            info["modelId"] = repo_id
        readme = commit.files.get("README.md")
        if readme is not None:
            try:
                card = _card_metadata(readme.data.decode("utf-8"))
            except (yaml.YAMLError, UnicodeDecodeError):
                card = None
            if card:
                info["cardData"] = card
                tags = card.get("tags") or []
                info["tags"] = [tags] if isinstance(tags, str) else [t for t in tags if isinstance(t, str)]
                for key in ("library_name", "pipeline_tag"):
                    if isinstance(card.get(key), str):
                        info[key] = card[key]
                if isinstance(card.get("license"), str):
                    info["tags"].append(f"license:{card['license']}")
        parameters: dict[str, int] = {}
        for path, entry in commit.files.items():
            if path.endswith(".safetensors") and "/" not in path:
                for dtype, n in (_safetensors_parameters(entry.data) or {}).items():
                    parameters[dtype] = parameters.get(dtype, 0) + n
        if parameters:
            info["safetensors"] = {"parameters": parameters, "total": sum(parameters.values())}
            info["tags"].append("safetensors")
        expand = self.query.get("expand") or self.query.get("expand[]")
        if expand:
            info = {k: v for k, v in info.items() if k in ("_id", "id") or k in expand}
        raise _Response(200, info)

    def _refs(self, repo_type: str, repo_id: str) -> None:
        with self.hub._lock:
            repo = self.hub._readable_repo(repo_type, repo_id, self.headers)
            refs = dict(repo.refs)

        def ref(name: str, target: str) -> dict:
            full = name if name.startswith("refs/") else f"refs/heads/{name}"
            return {"name": name, "ref": full, "targetCommit": target}

        data = {
            "branches": [ref(n, t) for n, t in refs.items() if not n.startswith("refs/")],
            "converts": [], "tags": [],
        }
        if self._param("include_prs"):
            data["pullRequests"] = [ref(n, t) for n, t in refs.items() if n.startswith("refs/pr/")]
        raise _Response(200, data)

    def _commits(self, repo_type: str, repo_id: str, revision: str) -> None:
        with self.hub._lock:
            repo = self.hub._readable_repo(repo_type, repo_id, self.headers)
            history = repo.history(repo.resolve(revision))
        items = [{"id": c.id, "title": c.title, "message": c.message, "date": c.date,
                  "authors": [{"user": DEFAULT_NAMESPACE}]} for c in history]
        raise _Response(200, items)

    # -- listing
    def _last_commits(self, repo: Repo, commit: Commit, paths: list[str]) -> dict[str, Commit]:
        """For each path (file or folder), the most recent commit in ``commit``'s history that changed it."""
        def state(c: Commit, path: str):
            if path in c.files:
                return c.files[path].blob_id
            return c.tree_ids.get(path)

        found: dict[str, Commit] = {}
        history = repo.history(commit)
        for path in paths:
            for i, c in enumerate(history):
                parent = history[i + 1] if i + 1 < len(history) else None
                if parent is None or state(parent, path) != state(c, path):
                    found[path] = c
                    break
        return found

    def _entries(self, repo: Repo, commit: Commit, paths: list[str], expand: bool) -> list[dict]:
        last = self._last_commits(repo, commit, paths) if expand else {}
        out = []
        for path in paths:
            if path in commit.files:
                info = commit.files[path].tree_json(path)
                if self.hub.hide_hashes == "all":
                    info = {"type": "file", "oid": None, "path": path, "size": info["size"]}
                if expand:
                    info["securityFileStatus"] = {"status": "safe", "avScan": {"virusFound": False, "virusNames": None},
                                                  "pickleImportScan": None}
            else:
                info = {"type": "directory", "oid": commit.tree_ids[path], "size": 0, "path": path}
            if expand:
                c = last[path]
                info["lastCommit"] = {"id": c.id, "title": c.title, "date": c.date}
            out.append(info)
        return out

    def _tree(self, repo_type: str, repo_id: str, revision: str, folder: str) -> None:
        folder = folder.strip("/")
        with self.hub._lock:
            repo = self.hub._readable_repo(repo_type, repo_id, self.headers)
            commit = repo.resolve(revision)
        if folder and folder not in commit.tree_ids:
            raise HubError(404, f"{folder} does not exist on \"{revision}\"", code="EntryNotFound",
                           headers={"X-Repo-Commit": commit.id})
        recursive, expand = self._flag("recursive"), self._flag("expand")
        prefix = f"{folder}/" if folder else ""
        names = [p for p in list(commit.files) + [t for t in commit.tree_ids if t] if p.startswith(prefix)]
        if not recursive:
            names = [p for p in names if "/" not in p[len(prefix):]]
        names.sort(key=lambda p: (p not in commit.tree_ids, p))  # folders first, then files, by path
        page = TREE_PAGE_SIZE_EXPANDED if expand else TREE_PAGE_SIZE
        page = int(self._param("limit") or page)
        start = int(base64.urlsafe_b64decode(self._param("cursor") or "MA==").decode())
        headers = {}
        if start + page < len(names):
            query = "&".join(f"{k}={quote(v[0])}" for k, v in self.query.items() if k != "cursor")
            cursor = base64.urlsafe_b64encode(str(start + page).encode()).decode()
            next_url = f"{self.hub.endpoint}{self.url_path}?{query}&cursor={cursor}".replace("?&", "?")
            headers["Link"] = f'<{next_url}>; rel="next"'
        raise _Response(200, self._entries(repo, commit, names[start : start + page], expand), headers)

    def _paths_info(self, repo_type: str, repo_id: str, revision: str) -> None:
        if "json" in self.headers.get("Content-Type", ""):
            payload = self._json()
            paths, expand = payload.get("paths", []), bool(payload.get("expand"))
        else:
            form = parse_qs(self.body.decode(), keep_blank_values=True)
            paths = form.get("paths", [])
            expand = (form.get("expand") or ["false"])[0].lower() in ("1", "true")
        with self.hub._lock:
            repo = self.hub._readable_repo(repo_type, repo_id, self.headers)
            commit = repo.resolve(revision)
        existing = [p.strip("/") for p in paths if p.strip("/") in commit.files or p.strip("/") in commit.tree_ids]
        raise _Response(200, self._entries(repo, commit, [p for p in existing if p], expand))

    # -- downloads
    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str) -> None:
        hub = self.hub
        with hub._lock:
            repo = hub._readable_repo(repo_type, repo_id, self.headers)
            commit = repo.resolve(revision)
        entry = commit.files.get(path)
        if entry is None:
            raise HubError(404, "Entry not found", code="EntryNotFound", headers={"X-Repo-Commit": commit.id})
        headers = {
            "X-Repo-Commit": commit.id,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f'inline; filename="{path.rsplit("/", 1)[-1]}"',
            "ETag": f'"{entry.sha256 if entry.lfs else entry.blob_id}"',
        }
        if entry.lfs:
            headers["X-Linked-Etag"] = f'"{entry.sha256}"'
            headers["X-Linked-Size"] = str(entry.size)
        body, status = entry.data, 200
        range_header = self.headers.get("Range")
        if range_header:
            match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", range_header)
            if not match or match.groups() == ("", ""):
                raise HubError(416, f"Invalid range {range_header!r}", headers={"Content-Range": f"bytes */{entry.size}"})
            first, last = match.groups()
            if first:
                start, end = int(first), min(int(last), entry.size - 1) if last else entry.size - 1
            else:
                start, end = max(entry.size - int(last), 0), entry.size - 1
            if start >= entry.size or start > end:
                raise HubError(416, "Requested range not satisfiable",
                               headers={"Content-Range": f"bytes */{entry.size}"})
            body, status = body[start : end + 1], 206
            headers["Content-Range"] = f"bytes {start}-{end}/{entry.size}"
        if self.method == "GET":
            if hub._take_fault("tamper", "GET", self.url_path, repo_id, path):
                body = bytes(b ^ 0xFF for b in body)
            if fault := hub._take_fault("flip", "GET", self.url_path, repo_id, path):
                flipped = bytearray(body)
                flipped[int(fault.value)] ^= 0xFF
                body = bytes(flipped)
            if fault := hub._take_fault("stall", "GET", self.url_path, repo_id, path):
                after, seconds = fault.value
                self.close_connection = True
                self._send(status, body[:after], {**headers, "Connection": "close"}, content_length=len(body))
                self.wfile.flush()
                time.sleep(seconds)
                raise _Sent()
            if fault := hub._take_fault("truncate", "GET", self.url_path, repo_id, path):
                self.close_connection = True
                self._send(status, body[: int(fault.value)], {**headers, "Connection": "close"},
                           content_length=len(body))
                self.wfile.flush()
                raise _Sent()
        raise _Response(status, body, headers)

    # -- uploads
    def _preupload(self, repo_type: str, repo_id: str, revision: str) -> None:
        self._require_auth()
        payload = self._json()
        with self.hub._lock:
            commit = self.hub._repo(repo_type, repo_id).resolve(revision)
        gitignore = payload.get("gitIgnore")
        if gitignore is None and ".gitignore" in commit.files:
            gitignore = commit.files[".gitignore"].data.decode("utf-8", "replace")
        files = []
        for item in payload.get("files", []):
            path, size = item.get("path"), item.get("size")
            if not isinstance(path, str) or not isinstance(size, int):
                raise HubError(400, "each file needs a string 'path' and an integer 'size'")
            sample = base64.b64decode(item.get("sample") or "")
            lfs = _gitattributes_lfs(commit.files, path) or size >= LFS_SIZE_THRESHOLD or _looks_binary(sample)
            existing = commit.files.get(path)
            files.append({
                "path": path,
                "uploadMode": "lfs" if lfs else "regular",
                "shouldIgnore": _gitignored(gitignore, path),
                "oid": existing.oid if existing is not None else None,
            })
        raise _Response(200, {"files": files, "commitOid": commit.id})

    def _route_lfs(self, method: str, repo_type: str, repo_id: str, rest: list[str]) -> None:
        hub = self.hub
        if method != "PUT":  # the upload href is pre-signed (like an S3 URL): the client sends no token to it
            self._require_auth()
        with hub._lock:
            repo = hub._repo(repo_type, repo_id)
        lfs_headers = {"Content-Type": "application/vnd.git-lfs+json"}
        base = f"{hub.endpoint}/{_URL_PREFIX[repo_type]}{repo_id}.git/info/lfs/objects"
        if rest == ["batch"] and method == "POST":
            payload = self._json()
            if payload.get("operation") != "upload":
                raise HubError(422, "only the 'upload' operation is served here; download through /resolve")
            if "basic" not in (payload.get("transfers") or ["basic"]):
                raise HubError(422, "only the 'basic' transfer is supported")
            objects = []
            for obj in payload.get("objects", []):
                oid, size = obj.get("oid"), obj.get("size")
                if not isinstance(oid, str) or not _HEX64.fullmatch(oid) or not isinstance(size, int) or size < 0:
                    objects.append({"oid": str(oid), "size": size if isinstance(size, int) else -1,
                                    "error": {"code": 422, "message": "oid must be a sha256 and size an integer"}})
                    continue
                with hub._lock:
                    present = repo.lfs_objects.get(oid)
                if present is not None and len(present) == size:
                    objects.append({"oid": oid, "size": size})  # no actions: already stored
                    continue
                objects.append({"oid": oid, "size": size, "authenticated": True, "actions": {
                    "upload": {"href": f"{base}/{oid}?size={size}&signature={hub._sign(repo, oid, size)}",
                               "header": {}},
                    "verify": {"href": f"{base}/verify", "header": {}},
                }})
            raise _Response(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"}, lfs_headers)
        if rest == ["verify"] and method == "POST":
            payload = self._json()
            with hub._lock:
                stored = repo.lfs_objects.get(payload.get("oid"))
            if stored is None or len(stored) != payload.get("size"):
                raise HubError(404, f"LFS object {payload.get('oid')} is not stored (or has another size)")
            raise _Response(200, {"oid": payload["oid"], "size": len(stored)}, lfs_headers)
        if len(rest) == 1 and method == "PUT" and _HEX64.fullmatch(rest[0]):
            oid, expected = rest[0], int(self._param("size") or -1)
            if not hmac.compare_digest(self._param("signature") or "", hub._sign(repo, oid, expected)):
                raise HubError(403, "upload URL signature does not match (get upload URLs from the LFS batch API)")
            actual = hashlib.sha256(self.body).hexdigest()
            if actual != oid or expected != len(self.body):
                raise HubError(400, f"uploaded content does not match: sha256 {actual} size {len(self.body)}, "
                                    f"expected sha256 {oid} size {expected}")
            with hub._lock:
                repo.lfs_objects[oid] = self.body
            raise _Response(200, b"", {"ETag": f'"{hashlib.md5(self.body).hexdigest()}"'})

    def _commit(self, repo_type: str, repo_id: str, revision: str) -> None:
        self._require_auth()
        hub = self.hub
        try:
            items = [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]
        except ValueError:
            raise HubError(400, "commit payload must be NDJSON") from None
        if not items or items[0].get("key") != "header":
            raise HubError(400, "the first NDJSON line of a commit must be the header")
        header = items[0]["value"]
        with hub._lock:
            repo = hub._repo(repo_type, repo_id)
            if _HEX40.fullmatch(revision) and revision not in repo.refs:
                raise HubError(400, f"Cannot commit to a commit id ({revision}): commit to a branch")
            base = repo.resolve(revision)
            parent_commit = header.get("parentCommit")
            if parent_commit and parent_commit != base.id:
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            tree = dict(base.files)
            for item in items[1:]:
                self._apply(repo, tree, item.get("key"), item.get("value") or {})
            ref = revision
            pr_url = None
            if self._flag("create_pr"):
                number = 1 + sum(1 for r in repo.refs if r.startswith("refs/pr/"))
                ref = f"refs/pr/{number}"
                pr_url = f"{hub._repo_url(repo)}/discussions/{number}"
            commit = hub._new_commit(repo, base.id, tree, header.get("summary") or "update",
                                     header.get("description") or "", ref)
        body = {"success": True, "commitOid": commit.id, "commitUrl": f"{hub._repo_url(repo)}/commit/{commit.id}",
                "commitMessage": commit.title, "hookOutput": ""}
        if pr_url:
            body["pullRequestUrl"] = pr_url
        raise _Response(200, body)

    def _apply(self, repo: Repo, tree: dict[str, FileEntry], key: str, value: dict) -> None:
        path = value.get("path")
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
            raise HubError(400, f"invalid path in commit operation: {path!r}")
        if key == "file":
            if value.get("encoding", "base64") != "base64":
                raise HubError(400, f"unsupported encoding {value.get('encoding')!r} for {path}")
            data = base64.b64decode(value.get("content") or "")
            if len(data) >= LFS_SIZE_THRESHOLD:
                raise HubError(400, f"{path}: files of 10 MiB or more must be uploaded through LFS")
            tree[path] = FileEntry(data, lfs=False)
        elif key == "lfsFile":
            data = repo.lfs_objects.get(value.get("oid"))
            if data is None:
                raise HubError(422, f"{path}: LFS object {value.get('oid')} was never uploaded")
            if value.get("size") is not None and value["size"] != len(data):
                raise HubError(422, f"{path}: size {value['size']} does not match the stored LFS object")
            tree[path] = FileEntry(data, lfs=True)
        elif key == "deletedFile":
            if path not in tree:
                raise HubError(404, f"A file with this name doesn't exist: {path}", code="EntryNotFound")
            del tree[path]
        elif key == "deletedFolder":
            prefix = path.rstrip("/") + "/"
            doomed = [p for p in tree if p.startswith(prefix)]
            if not doomed:
                raise HubError(404, f"A folder with this name doesn't exist: {path}", code="EntryNotFound")
            for p in doomed:
                del tree[p]
        else:
            raise HubError(400, f"unknown commit operation {key!r}")

    def _validate_yaml(self) -> None:
        payload = self._json()
        content = payload.get("content")
        if not isinstance(content, str):
            raise HubError(400, "'content' (the README.md text) is required")
        errors, warnings = validate_card_metadata(content)
        if "text/plain" in self.headers.get("Accept", ""):
            text = "\n".join(f"- {e}" for e in errors) or "\n".join(f"- {w}" for w in warnings)
            raise _Response(400 if errors else 200, text.encode(), {"Content-Type": "text/plain; charset=utf-8"})
        raise _Response(400 if errors else 200, {
            "errors": [{"message": e} for e in errors], "warnings": [{"message": w} for w in warnings],
        })


class _Sent(Exception):
    """The response was already written (a truncated body): nothing more to send."""
