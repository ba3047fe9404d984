"""The hub layer: get a model's files onto local disk, verified, wherever they live.

A catalog entry's zoo repo (config.json, safetensors, card) is pinned by sha256 and size. It is read from

* the **embedded mirror** ``$ZOO_HUB/<name>`` (default: ``hub/`` of a source checkout) when that folder exists;
* else its **Hub home** ``<ZOO_HF_ORG>/<name>`` on the Hugging Face Hub (``$ZOO_HF_ENDPOINT`` for a mirror
  server), through ``huggingface_hub`` into the standard HF cache (``$ZOO_HF_CACHE`` overrides it), at the
  entry's commit when one is pinned and at ``main`` otherwise: the sha256 pins make a moving ``main`` safe;
* else, for an entry not released yet, the authors' **upstream** files are downloaded (resumable, retried)
  into ``$ZOO_HOME/downloads`` and converted once into ``$ZOO_HOME/converted``.

Nothing unverified reaches a model: a damaged cache copy is fetched again, a damaged transfer is retried once
and then reported, and a Hub repo that serves other content than this release pinned raises
:class:`RepoChangedError`. Hashing a multi-GB file on every load would dominate load time, so a successful
check is remembered (keyed by path, size, mtime and inode) under ``$ZOO_HOME/verified``. One file lock per Hub
repo (and per upstream model) serialises downloads between processes.

A load needs no write when its files are at hand: with a read-only ``ZOO_HOME`` (a container, a shared install) the
locks and the verified-file marks are skipped and every load hashes its files again; a read-only, filled HF cache
loads with ``HF_HUB_OFFLINE=1``. A download that cannot fit is refused before its first byte (the sizes are
pinned), and a full disk or read-only folder met along the way is one :class:`~zoo.errors.StorageError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import html.parser
import http.client
import json
import logging
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from filelock import FileLock

from zoo.io import atomic_path, check_space, folder_undone_on_failure, sha256_file, storage_error, storage_errors
from zoo.io import write_json_atomic
from zoo.errors import DownloadError, HubError, IntegrityError, OfflineError, RepoChangedError
from zoo.registry import FileSpec, ModelEntry, get_entry, import_object
from zoo.settings import embedded_hub_dir, hf_cache_dir, hf_cache_root, hf_endpoint, is_offline, zoo_home

__all__ = [
    "IntegrityError",
    "RepoChangedError",
    "OfflineError",
    "HubError",
    "DownloadError",
    "download",
    "fetch",
    "fetch_hf",
    "resolve_repo",
    "where",
    "zoo_home",
    "embedded_hub_dir",
    "is_offline",
    "hf_endpoint",
    "hf_cache_dir",
    "hub_errors",
]

# never fetched from a Hub repo: the zoo reads safetensors and never unpickles
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")
DOWNLOAD_RETRIES = 4  # upstream downloads: after the first try, with backoff 1, 2, 4, 8 s
RETRY_STATUS = {429, 500, 502, 503, 504}


def where(entry: ModelEntry) -> str:
    """Where ``entry`` loads from on this machine: ``embedded`` (a local mirror folder), ``hub`` or ``upstream``."""
    if entry.released:
        return "embedded" if (embedded_hub_dir() / entry.name).is_dir() else "hub"
    return "upstream"


def _offline_error(entry: ModelEntry, reason: str) -> OfflineError:
    if entry.released:
        origin = f"the Hugging Face repo {entry.hub_repo}@{entry.revision or 'main'}"
        # an installed zoo has no hub/ of a checkout to put a repo into: then the way is a mirror folder of one's own
        mirror = (f"put the repo folder at {embedded_hub_dir() / entry.name}"
                  if os.environ.get("ZOO_HUB") or embedded_hub_dir().is_dir()
                  else f"set ZOO_HUB to a mirror folder holding the repo as {entry.name}/")
        fixes = (f"run `zoo download {entry.name}` on a machine with network and copy its HF cache to "
                 f"{hf_cache_root()} (or set ZOO_HF_CACHE to the copied folder); or "
                 f"{mirror}; or set ZOO_HF_ENDPOINT to a Hub mirror")
    else:
        origin = "the official upstream files"
        fixes = (f"run `zoo download {entry.name}` with network, or place the official files in "
                 f"{zoo_home() / 'downloads' / entry.name}")
    return OfflineError(f"model {entry.name!r} is not on this machine and cannot be downloaded ({reason}). It comes "
                        f"from {origin}. To get it: {fixes}; or pass a local repo folder to zoo.load(path).")


_home_unwritable_said = False


def _home_unwritable(err: OSError) -> None:
    """For a lock or a verified-file mark ZOO_HOME cannot take (read-only, or full): go on without it, and say once per
    process that loads are slower for it. Any other fault is raised."""
    global _home_unwritable_said
    if storage_error(err) is None:
        raise err
    if not _home_unwritable_said:
        _home_unwritable_said = True
        logging.getLogger(__name__).warning(
            "zoo: cannot write to ZOO_HOME %s (%s): loading without its download locks and verified-file marks, so "
            "every load hashes its files again and is slower; set ZOO_HOME to a writable folder to keep them",
            zoo_home(), os.strerror(err.errno))


@contextlib.contextmanager
def _lock(kind: str, key: str) -> Iterator[None]:
    """One lock per Hub repo (every model and manifest of that repo) or per upstream model, across processes; none
    where ZOO_HOME is read-only (the HF cache's own locks still guard its downloads)."""
    locks = zoo_home() / "locks"
    lock: FileLock | None = FileLock(str(locks / f"{kind}--{key.replace('/', '--')}.lock"))
    try:
        locks.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except OSError as err:
        _home_unwritable(err)
        lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


# ----------------------------------------------------------------------------- verification
def _matches(path: Path, spec: FileSpec) -> bool:
    """Whether ``path`` holds exactly the pinned bytes (remembered per path/size/mtime/inode once checked)."""
    st = path.stat()
    marker = zoo_home() / "verified" / hashlib.sha256(str(path.resolve()).encode()).hexdigest()
    checked = f"{spec.sha256} {st.st_size} {st.st_mtime_ns} {st.st_ino}"
    if marker.exists() and marker.read_text() == checked:
        return True
    if (spec.size is not None and st.st_size != spec.size) or sha256_file(path) != spec.sha256:
        return False
    try:
        with atomic_path(marker) as tmp:
            tmp.write_text(checked)
    except OSError as err:  # only a shortcut for the next load: a load goes on without it
        _home_unwritable(err)
    return True


def _mismatch(spec: FileSpec, path: Path) -> str:
    size = path.stat().st_size
    got = f"size {size} bytes (expected {spec.size})" if spec.size is not None and size != spec.size else \
        f"sha256 {sha256_file(path)}"
    return f"{spec.path}: content does not match its pin (expected sha256 {spec.sha256}, got {got})"


def verify_file(path: Path, spec: FileSpec, *, delete_bad: bool) -> None:
    """Check ``path`` against ``spec``; on mismatch delete it (if ``delete_bad``) and raise IntegrityError."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{spec.path}: expected at {path}, but it is missing")
    if _matches(path, spec):
        return
    message = _mismatch(spec, path)
    if delete_bad:
        _delete(path)
        raise IntegrityError(f"{message}. The bad copy was deleted; loading again downloads it afresh.")
    raise IntegrityError(f"{message}. The file {path} is part of a folder the zoo does not own: restore it "
                         "(e.g. `git checkout`) or remove the folder to load the model from the Hub.")


def _delete(path: Path) -> None:
    """Remove a cached file; for an HF snapshot symlink, remove the blob it points to as well."""
    real = Path(os.path.realpath(path))
    for p in {Path(path), real}:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _git_blob_id(path: Path) -> str:
    h = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def _matches_server_claim(path: Path) -> bool:
    """Whether an HF cache file holds what the server announced: its blob is named by the ETag, which is the
    sha256 of an LFS file or the git blob id of a regular one."""
    claim = Path(os.path.realpath(path)).name
    if len(claim) == 64:
        return sha256_file(path) == claim
    if len(claim) == 40:
        return _git_blob_id(path) == claim
    return False


# ----------------------------------------------------------------------------- Hub errors
_NETWORK_ERRORS = {"TransportError", "ConnectError", "NetworkError", "TimeoutException", "ConnectTimeout",
                   "ReadTimeout", "RemoteProtocolError", "ReadError", "OfflineModeIsEnabled"}


def _is_network_error(err: BaseException) -> bool:
    if isinstance(err, (ConnectionError, TimeoutError)):
        return True
    return any(cls.__name__ in _NETWORK_ERRORS for cls in type(err).__mro__)


def _hub_error(err: BaseException, repo_id: str, revision: str | None, path: str | None = None,
               *, upload: bool = False) -> Exception | None:
    """The zoo error for a ``huggingface_hub`` failure, or None when it is not a Hub failure."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    at = f"{repo_id}@{revision or 'main'}"
    endpoint = hf_endpoint() or "https://huggingface.co"
    status = getattr(getattr(err, "response", None), "status_code", None)
    if upload:
        if isinstance(err, HfHubHTTPError) and not isinstance(err, RevisionNotFoundError):
            if status in (401, 403) or isinstance(err, RepositoryNotFoundError):
                return HubError(f"the Hub at {endpoint} refused the upload to {repo_id} (HTTP {status}): set "
                                "HF_TOKEN (or `hf auth login`) to a token that can write to that namespace")
        elif _is_network_error(err):
            return OfflineError(f"cannot reach the Hub at {endpoint} to upload {repo_id} ({type(err).__name__}): "
                                "check the network, or set ZOO_HF_ENDPOINT to a reachable Hub; nothing was uploaded")
    if isinstance(err, GatedRepoError):
        return HubError(f"{at} is gated: accept its terms on the Hub page, then set HF_TOKEN (or `hf auth login`)")
    if isinstance(err, RepositoryNotFoundError):
        return HubError(f"Hub repo {repo_id} not found at {endpoint}, or it is private: check the name, or set "
                        f"HF_TOKEN to a token that can read it (or `hf auth login`)")
    if isinstance(err, RevisionNotFoundError):
        return HubError(f"revision {revision!r} does not exist in Hub repo {repo_id}: use a branch, tag or commit id "
                        "of that repo")
    if isinstance(err, RemoteEntryNotFoundError):
        return HubError(f"{at} has no file {path!r}: the repo may have changed since this zoo release")
    if isinstance(err, HfHubHTTPError):
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        if status in (401, 403):
            return HubError(f"the Hub refused access to {at} (HTTP {status}): set HF_TOKEN to a token that can "
                            f"read it (or `hf auth login`)")
        if status in RETRY_STATUS:
            return HubError(f"the Hub at {endpoint} failed while serving {at} (HTTP {status}); try again later")
        return HubError(f"the Hub answered {first_line} for {at}")
    if isinstance(err, LocalEntryNotFoundError) or _is_network_error(err):
        return OfflineError(f"cannot reach the Hub at {endpoint} for {at} ({type(err).__name__}), and the files "
                            "are not in the local cache")
    return None


@contextlib.contextmanager
def hub_errors(repo_id: str, revision: str | None = None, path: str | None = None, *,
               upload: bool = False) -> Iterator[None]:
    """Turn any ``huggingface_hub`` failure inside the block into one zoo error (``HubError``/``OfflineError``, or a
    ``StorageError`` when the HF cache's disk is full or read-only).

    The client's own retry warnings ("Retrying in 2s") are held back meanwhile: when the retries fail, the zoo
    error says what happened in one line."""
    client_log = logging.getLogger("huggingface_hub")
    level = client_log.level
    client_log.setLevel(logging.ERROR)
    try:
        yield
    except Exception as err:  # noqa: BLE001  (translated or re-raised as is)
        translated = _hub_error(err, repo_id, revision, path, upload=upload)
        if translated is None and isinstance(err, OSError):
            # the client's failed write names no file, or a symlink's relative target: name the cache then
            where = err.filename if err.filename and os.path.isabs(err.filename) else hf_cache_root()
            translated = storage_error(err, where)
        if translated is None:
            raise
        raise translated from None
    finally:
        client_log.setLevel(level)


# ----------------------------------------------------------------------------- Hub repos
class _NotCached(Exception):
    """A pinned file is not (or not intact) in the local cache: it has to be downloaded."""


def _hf_download(repo_id: str, path: str, revision: str, *, local_only: bool = False) -> Path:
    from huggingface_hub import hf_hub_download

    with hub_errors(repo_id, revision, path):
        return Path(hf_hub_download(repo_id, path, revision=revision, endpoint=hf_endpoint(),
                                    cache_dir=hf_cache_dir(), local_files_only=local_only, library_name="zoo"))


def _cached(repo_id: str, path: str, revision: str, spec: FileSpec) -> Path:
    """The HF cache's copy of ``path`` if it holds exactly ``spec``'s bytes (no network call), else _NotCached; a
    truncated or altered copy is deleted, never used."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        local = _hf_download(repo_id, path, revision, local_only=True)
    except OfflineError as err:
        if isinstance(err.__context__, LocalEntryNotFoundError):
            raise _NotCached from None
        raise
    if not _matches(local, spec):
        _delete(local)
        raise _NotCached
    return local


def _download_verified(repo_id: str, path: str, revision: str, complaint, *, local_only: bool = False) -> Path:
    """``path`` of a Hub repo through the HF cache, judged by ``complaint(local)``: None for a good copy, an error to
    raise at once, or the IntegrityError message should the copy be bad twice. A bad copy is deleted, and downloaded
    once more since a transfer can be damaged."""
    for _ in range(2):
        local = _hf_download(repo_id, path, revision, local_only=local_only)
        problem = complaint(local)
        if problem is None:
            return local
        _delete(local)
        if isinstance(problem, Exception):
            raise problem
    raise IntegrityError(problem)


def _hub_file(repo_id: str, spec: FileSpec, revision: str, *, local_only: bool) -> Path:
    """One pinned file of a Hub repo, verified: from the HF cache, or downloaded (retried once if damaged)."""
    if local_only:
        return _cached(repo_id, spec.path, revision, spec)

    def complaint(local: Path) -> str | Exception | None:
        if _matches(local, spec):
            return None
        message = _mismatch(spec, local)
        if _matches_server_claim(local):  # the server stands by these bytes: the repo changed, not the transfer
            return RepoChangedError(
                f"{message}: Hub repo {repo_id}@{revision} serves a different {spec.path} than this zoo release "
                "pinned, so this Hub repo changed since this zoo release. Upgrade the zoo (`pip install -U "
                "lightning-zoo`), or load the commit this release was made from with revision=<commit>.")
        return (f"{message}, twice in a row from {repo_id}@{revision}: the transfer or the server is damaging the "
                "file. Nothing was kept; try again later or from another mirror.")

    return _download_verified(repo_id, spec.path, revision, complaint)


def _hub_snapshot(entry: ModelEntry, revision: str, *, local_only: bool) -> Path:
    snapshot = None
    for spec in entry.files:
        local = _hub_file(entry.hub_repo, spec, revision, local_only=local_only)
        if snapshot is None:
            snapshot = local.parents[len(Path(spec.path).parts) - 1]  # the snapshot folder holding spec.path
            revision = snapshot.name  # the commit a branch resolved to: every file comes from that one commit
    return snapshot


def _check_hub_space(entry: ModelEntry, revision: str) -> None:
    """Refuse, before downloading, the files of ``entry`` that are not cached when the HF cache's disk cannot hold
    them."""
    from huggingface_hub import try_to_load_from_cache

    missing = [spec for spec in entry.files if not isinstance(
        try_to_load_from_cache(entry.hub_repo, spec.path, cache_dir=hf_cache_dir(), revision=revision), str)]
    check_space(hf_cache_root(), sum(spec.size or 0 for spec in missing), f"downloading {entry.name}")


def _unreachable_hub() -> str | None:
    """Why the Hub cannot be reached now, from one connection attempt; None when it can, or when a proxy is set (it
    may reach what this machine cannot). With no network huggingface_hub retries each file for about 25 s (pauses
    of 1, 2, 4, 8 and 8 s) before giving up."""
    import socket
    import urllib.request
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    if urllib.request.getproxies():
        return None
    endpoint = hf_endpoint() or constants.ENDPOINT
    url = urlsplit(endpoint)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)),
                                 timeout=constants.HF_HUB_ETAG_TIMEOUT).close()
    except OSError as err:
        return f"cannot reach the Hub at {endpoint}: {err.strerror or err}"
    return None


def _fetch_hub(entry: ModelEntry) -> Path:
    """A released entry from its Hub home: no network call when every pinned file is cached and intact."""
    revision = entry.revision or "main"
    try:
        return _hub_snapshot(entry, revision, local_only=True)
    except _NotCached:
        pass
    if is_offline():
        raise _offline_error(entry, "HF_HUB_OFFLINE is set")
    if (unreachable := _unreachable_hub()) is not None:
        raise _offline_error(entry, unreachable)
    _check_hub_space(entry, revision)
    try:
        return _hub_snapshot(entry, revision, local_only=False)
    except OfflineError as err:
        raise _offline_error(entry, str(err)) from None


# ----------------------------------------------------------------------------- ad-hoc Hub repos (hf://)
def fetch_hf(repo_id: str, revision: str | None = None) -> Path:
    """Any Hub repo at ``revision`` (branch, tag or commit; default ``main``), verified against the Hub's hashes.

    The Hub's file metadata stands in for catalog pins: LFS files carry their sha256; regular files are
    checked against their git blob id. The resolved manifest is saved under ``$ZOO_HOME/manifests`` so that a
    commit loads later with no network call, and a branch loads from its last manifest when the network is down.
    """
    with _lock("hf", repo_id):
        entry = _hf_entry(repo_id, revision or "main")
        try:
            return _fetch_hub(entry)
        except OfflineError:
            raise OfflineError(f"hf://{repo_id}@{revision or 'main'} is not fully on this machine and the Hub cannot "
                               f"be reached; run `zoo download hf://{repo_id}` with network first, or pass a local "
                               "folder to zoo.load") from None


def _hf_entry(repo_id: str, revision: str) -> ModelEntry:
    manifests = zoo_home() / "manifests" / repo_id.replace("/", "--")
    ref_file = manifests / "refs" / revision
    cached = ref_file.exists()
    is_commit = len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)
    if cached and (is_commit or is_offline()):  # a commit never moves
        manifest = json.loads((manifests / f"{ref_file.read_text().strip()}.json").read_text())
    elif is_offline():
        raise OfflineError(f"hf://{repo_id}@{revision} was never downloaded here and HF_HUB_OFFLINE is set; run "
                           f"`zoo download hf://{repo_id}` with network first, or pass a local folder to zoo.load")
    else:
        try:
            if (unreachable := _unreachable_hub()) is not None:
                raise OfflineError(unreachable)
            manifest = _resolve_manifest(repo_id, revision)
        except OfflineError as err:
            if not cached:
                raise OfflineError(f"hf://{repo_id}@{revision} was never downloaded here and the Hub is out of reach "
                                   f"({err}); run `zoo download hf://{repo_id}` with network first") from None
            # the network is down: serve the branch as it was last seen
            manifest = json.loads((manifests / f"{ref_file.read_text().strip()}.json").read_text())
        else:
            write_json_atomic(manifests / f"{manifest['commit']}.json", manifest)
            for ref in {revision, manifest["commit"]}:
                with atomic_path(manifests / "refs" / ref) as tmp:
                    tmp.write_text(manifest["commit"])
    files = tuple(FileSpec(f["path"], f["sha256"], f["size"]) for f in manifest["files"])
    return ModelEntry(name=f"hf://{repo_id}@{manifest['commit']}", method="", repo=repo_id,
                      revision=manifest["commit"], files=files)


def _resolve_manifest(repo_id: str, revision: str) -> dict:
    """Pins for every non-pickle file of ``repo_id`` at ``revision``, from the Hub's hashes only."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hf_endpoint())
    with hub_errors(repo_id, revision):
        info = api.model_info(repo_id, revision=revision, files_metadata=True)
    siblings = [s for s in info.siblings or [] if s.rfilename != ".gitattributes"]
    kept = [s for s in siblings if not s.rfilename.endswith(PICKLE_SUFFIXES)]
    if not any(s.rfilename.endswith(".safetensors") for s in kept):
        pickles = sorted(s.rfilename for s in siblings if s.rfilename.endswith(PICKLE_SUFFIXES))
        what = f"only pickle files ({', '.join(pickles[:5])})" if pickles else "no safetensors weights"
        raise HubError(f"hf://{repo_id}@{revision} holds {what}: the zoo loads safetensors and never unpickles a "
                       "file from a Hub repo. Convert a trusted copy with `zoo convert METHOD`.")
    hashes = {s.rfilename: (s.lfs.sha256 if s.lfs else None, s.blob_id, s.size) for s in kept}
    if any(sha is None and blob is None for sha, blob, _ in hashes.values()):
        # some servers (mirrors) send no hashes in model_info: ask for each path's tree entry
        with hub_errors(repo_id, info.sha):
            for item in api.get_paths_info(repo_id, sorted(hashes), revision=info.sha):
                lfs = getattr(item, "lfs", None)
                hashes[item.path] = (lfs.sha256 if lfs else None, getattr(item, "blob_id", None),
                                     getattr(item, "size", None))
    files = []
    for path, (sha, blob, size) in sorted(hashes.items()):
        if sha:
            files.append({"path": path, "sha256": sha, "size": size})
        elif blob:
            files.append({"path": path, **_verified_regular_file(repo_id, path, info.sha, blob)})
        else:
            raise IntegrityError(f"hf://{repo_id}: the Hub sends no sha256 or git blob id for {path}, so the zoo "
                                 "cannot verify it; load it from a server that does, or from a local folder")
    return {"repo": repo_id, "commit": info.sha, "files": files}


def _verified_regular_file(repo_id: str, path: str, commit: str, blob_id: str) -> dict:
    """A small regular file's sha256, from its bytes once they match the Hub's git blob id."""
    wrong = (f"hf://{repo_id}/{path}: git blob id of the downloaded bytes is not {blob_id} from the Hub, twice in a "
             "row; nothing was kept")
    local = _download_verified(repo_id, path, commit, lambda local: None if _git_blob_id(local) == blob_id else wrong)
    return {"sha256": sha256_file(local), "size": local.stat().st_size}


# ----------------------------------------------------------------------------- upstream files
class _FormFinder(html.parser.HTMLParser):
    """The download form of Google Drive's "can't scan this file for viruses" page: its action and hidden fields."""

    def __init__(self):
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self._in_form = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and self.action is None and attrs.get("action"):
            self.action, self._in_form = attrs["action"], True
        elif tag == "input" and self._in_form and attrs.get("name"):
            self.fields[attrs["name"]] = attrs.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "form":
            self._in_form = False


def _confirmation_url(page: bytes, url: str) -> str | None:
    finder = _FormFinder()
    finder.feed(page.decode("utf-8", "replace"))
    if not finder.action or "id" not in finder.fields:
        return None
    action = urllib.parse.urljoin(url, finder.action)
    return f"{action}?{urllib.parse.urlencode(finder.fields)}"


def _retry_pause(attempt: int, retry_after: str | None) -> float:
    if retry_after and retry_after.strip().isdigit():
        return min(float(retry_after), 60.0)
    return float(2**attempt)


def _download_url(url: str, dest: Path, spec: FileSpec) -> None:
    """Download ``url`` to ``dest``: resumes a partial ``.part`` with HTTP Range, retries connection errors and
    5xx/429 with backoff, follows Google Drive's confirmation form, checks the sha256 before ``dest`` appears. A
    file of known size that cannot fit is refused before its first byte."""
    from tqdm.auto import tqdm

    from zoo import __version__

    part = dest.with_name(dest.name + ".part")
    if spec.size:
        check_space(dest.parent, spec.size - (part.stat().st_size if part.exists() else 0), f"downloading {spec.path}")
    with storage_errors(dest.parent):
        dest.parent.mkdir(parents=True, exist_ok=True)
    manual = f"or place a copy you downloaded yourself at {dest}"
    attempt, confirmations = 0, 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        headers = {"User-Agent": f"zoo/{__version__}"}
        if have:
            headers["Range"] = f"bytes={have}-"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
                if response.headers.get_content_type() == "text/html":
                    page = response.read(1 << 20)
                    confirmed = _confirmation_url(page, url) if confirmations < 2 else None
                    if confirmed is None:
                        raise DownloadError(f"{url} answered with an HTML page, not the file {spec.path}; the link "
                                            f"may have changed: fetch the file in a browser, {manual}")
                    url, confirmations = confirmed, confirmations + 1
                    continue
                resumed = have and response.status == 206
                if resumed and not (response.headers.get("Content-Range") or "").startswith(f"bytes {have}-"):
                    resumed = False  # not the range asked for: start over
                remaining = int(response.headers.get("Content-Length") or 0) or None
                total = remaining + have if resumed and remaining else remaining
                with storage_errors(part), open(part, "ab" if resumed else "wb") as out, tqdm(
                    total=total, initial=have if resumed else 0, unit="B", unit_scale=True, desc=Path(spec.path).name
                ) as bar:
                    while block := response.read(1 << 20):
                        out.write(block)
                        bar.update(len(block))
                if total is not None and part.stat().st_size < total:
                    raise ConnectionError(f"the connection closed after {part.stat().st_size} of {total} bytes")
            break
        except urllib.error.HTTPError as err:
            if err.code == 416 and have:  # the partial file is not a prefix the server knows: start over
                part.unlink(missing_ok=True)
                continue
            if err.code in RETRY_STATUS and attempt < DOWNLOAD_RETRIES:
                time.sleep(_retry_pause(attempt, err.headers.get("Retry-After")))
                attempt += 1
                continue
            raise DownloadError(f"{url} answered HTTP {err.code} {err.reason} for {spec.path}"
                                + (" (access denied: the link may need a sign-in)" if err.code in (401, 403) else "")
                                + (" (not found: the link may have moved)" if err.code == 404 else "")
                                + f"; {manual}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException) as err:
            if attempt < DOWNLOAD_RETRIES:
                time.sleep(_retry_pause(attempt, None))
                attempt += 1
                continue
            reason = getattr(err, "reason", err)
            kept = f"; the {part.stat().st_size} bytes received are kept in {part} and resume next time" \
                if part.exists() and part.stat().st_size else ""
            raise OfflineError(f"download of {url} failed after {attempt + 1} tries ({reason}){kept}; {manual}") \
                from None
    if spec.sha256 and sha256_file(part) != spec.sha256:
        actual = sha256_file(part)
        part.unlink()
        raise IntegrityError(f"{spec.path} from {url}: expected sha256 {spec.sha256}, got {actual}; nothing was kept")
    os.replace(part, dest)


def _parse_hf_url(url: str) -> tuple[str, str | None, str]:
    """``hf://owner/name[@revision]/path`` -> (repo id, revision, path)."""
    owner, name_at, path = url[len("hf://"):].split("/", 2)
    name, _, revision = name_at.partition("@")
    return f"{owner}/{name}", revision or None, path


def _fetch_hf_upstream(entry: ModelEntry, spec: FileSpec) -> Path:
    """An official file hosted on the Hub: through the HF cache, checked against the Hub's LFS sha256."""
    repo_id, revision, path = _parse_hf_url(spec.url)
    revision = revision or "main"
    spec = _recorded_pin(entry, spec)
    if spec.sha256:  # pinned and cached: no network call
        with contextlib.suppress(_NotCached):
            return _cached(repo_id, path, revision, spec)

    def complaint(local: Path) -> str | Exception | None:
        if (spec.sha256 and _matches(local, spec)) or (not spec.sha256 and _matches_server_claim(local)):
            return None
        if spec.sha256 is None and len(Path(os.path.realpath(local)).name) not in (40, 64):
            return IntegrityError(f"{spec.url}: the server sent no hash for {path}, so it cannot be verified; "
                                 f"download it from the Hub itself")
        return (f"{spec.url}: the downloaded bytes do not match "
                f"{'the pinned sha256 ' + spec.sha256 if spec.sha256 else 'the hash the Hub announced'}, "
                "twice in a row; nothing was kept")

    if not is_offline() and (unreachable := _unreachable_hub()) is not None:
        try:  # the HF cache may hold the file still, from before its pin was recorded in ZOO_HOME
            return _download_verified(repo_id, path, revision, complaint, local_only=True)
        except OfflineError:
            raise OfflineError(unreachable) from None
    return _download_verified(repo_id, path, revision, complaint, local_only=is_offline())


def _recorded_pin(entry: ModelEntry, spec: FileSpec, downloaded: Path | None = None) -> FileSpec:
    """``spec``, with the sha256 and size recorded on first download when the catalog has none. Upstream files whose
    hash was never measured are pinned from their ``downloaded`` copy (trust on first use)."""
    if spec.sha256:
        return spec
    pin_file = zoo_home() / "pins" / f"{entry.name}.json"
    pins = json.loads(pin_file.read_text()) if pin_file.exists() else {}
    if spec.path not in pins and downloaded is not None:
        pins[spec.path] = {"sha256": sha256_file(downloaded), "size": downloaded.stat().st_size}
        write_json_atomic(pin_file, pins)
    return replace(spec, **pins[spec.path]) if spec.path in pins else spec


def _fetch_upstream(entry: ModelEntry) -> Path:
    downloads = zoo_home() / "downloads" / entry.name
    files: dict[str, Path] = {}
    pinned: dict[str, str] = {}
    for spec in entry.upstream:
        if spec.url.startswith("hf://"):
            try:
                local = _fetch_hf_upstream(entry, spec)
            except OfflineError as err:
                raise _offline_error(entry, str(err)) from None
        else:
            local = downloads / spec.path
            if not local.exists():
                if is_offline():
                    raise _offline_error(entry, "ZOO_OFFLINE/HF_HUB_OFFLINE is set")
                _download_url(spec.url, local, spec)
        spec = _recorded_pin(entry, spec, local)
        verify_file(local, spec, delete_bad=True)
        files[spec.path] = local
        pinned[spec.path] = spec.sha256
    digest = hashlib.sha256(json.dumps(pinned, sort_keys=True).encode()).hexdigest()[:16]
    out = zoo_home() / "converted" / entry.name / digest
    if not out.exists():
        with folder_undone_on_failure(out.parent):
            tmp = Path(tempfile.mkdtemp(prefix=f".{digest}.", dir=out.parent))
            try:
                import_object(entry.converter)(files, tmp, entry)
                os.replace(tmp, out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out


# ----------------------------------------------------------------------------- public
def fetch(entry: ModelEntry) -> Path:
    """Return a local folder with every file of ``entry``, each verified against its sha256.

    Safe to call from several processes at once: a file lock per Hub repo (per model for upstream files)
    serialises the first download.
    """
    if entry.released:
        mirror = embedded_hub_dir() / entry.name
        if mirror.is_dir():  # read in place: nothing to download, nothing to lock
            for spec in entry.files:
                verify_file(mirror / spec.path, spec, delete_bad=False)
            return mirror
        with _lock("hf", entry.hub_repo):
            return _fetch_hub(entry)
    with _lock("upstream", entry.name):
        return _fetch_upstream(entry)


def resolve_repo(name_or_path: str | os.PathLike, *, revision: str | None = None) -> Path:
    """The verified local folder behind a catalog name, ``hf://owner/repo[@revision]``, or a local repo folder."""
    text = str(name_or_path)
    if text.startswith("hf://"):
        repo_id, _, at = text[len("hf://"):].partition("@")
        return fetch_hf(repo_id, revision or at or None)
    path = Path(text).expanduser()
    if path.is_dir():
        if revision is not None:
            raise ValueError(f"revision= applies to Hub models, not to the local folder {path}")
        return path
    if isinstance(name_or_path, os.PathLike) or "/" in text or os.sep in text or text.startswith((".", "~")):
        # catalog names never contain a slash; Hub repos are spelled hf://owner/repo
        raise FileNotFoundError(
            f"{path} is not a folder (a zoo repo folder holds config.json + model.safetensors); "
            "for a Hugging Face repo write hf://owner/repo"
        )
    entry = get_entry(text)
    if revision is not None and revision != entry.revision:
        if not entry.released:
            raise ValueError(f"model {entry.name!r} is converted from its official files, which have no revisions")
        return fetch_hf(entry.hub_repo, revision)  # another commit: verified by the Hub's own hashes
    return fetch(entry)


# zoo.download: a catalog name or hf://owner/repo[@revision] fetched into the local cache; returns its folder
download = resolve_repo
