"""The hub layer: get a catalog entry's files onto local disk, verified, from one of three sources.

* **embedded** — a folder of the repo's ``hub/`` (or of ``$ZOO_HUB``), used in place;
* **hf** — the Hugging Face Hub through ``huggingface_hub`` at the entry's pinned commit, in the standard HF
  cache (``$ZOO_HF_CACHE`` overrides the cache folder, ``$ZOO_HF_ENDPOINT`` the endpoint);
* **upstream** — official files over plain HTTPS into ``$ZOO_HOME/downloads``, turned into a zoo repo by the
  method's converter and cached under ``$ZOO_HOME/converted``.

Every file's sha256 is checked before use; a bad copy is deleted and :class:`IntegrityError` names the file
and both hashes. Re-hashing a multi-GB file on every load would dominate load time, so a successful check is
remembered (keyed by path, size, mtime and inode) under ``$ZOO_HOME/verified``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

from filelock import FileLock

from zoo._io import atomic_path, sha256_file, write_json_atomic
from zoo.registry import FileSpec, ModelEntry, get_entry, import_object

__all__ = [
    "IntegrityError",
    "OfflineError",
    "download",
    "fetch",
    "zoo_home",
    "embedded_hub_dir",
    "is_offline",
    "hf_endpoint",
    "hf_cache_dir",
]

_TRUE = {"1", "true", "yes", "on"}


class IntegrityError(RuntimeError):
    """A file's content does not match its pinned sha256 (or size)."""


class OfflineError(RuntimeError):
    """A model is needed that is not on this machine and cannot be downloaded now."""


# ----------------------------------------------------------------------------- settings
def zoo_home() -> Path:
    return Path(os.environ.get("ZOO_HOME") or Path.home() / ".cache" / "zoo")


def embedded_hub_dir() -> Path:
    """``$ZOO_HUB`` or the ``hub/`` folder beside the ``zoo`` package."""
    return Path(os.environ.get("ZOO_HUB") or Path(__file__).resolve().parent.parent / "hub")


def hf_endpoint() -> str | None:
    return os.environ.get("ZOO_HF_ENDPOINT") or None


def hf_cache_dir() -> str | None:
    return os.environ.get("ZOO_HF_CACHE") or None


def is_offline() -> bool:
    return any(os.environ.get(v, "").lower() in _TRUE for v in ("HF_HUB_OFFLINE", "ZOO_OFFLINE"))


def _offline_error(entry: ModelEntry, reason: str) -> OfflineError:
    where = {
        "hf": f"the Hugging Face repo {entry.repo}@{entry.revision}",
        "upstream": "the official upstream files",
        "embedded": f"the embedded hub folder {entry.repo}",
    }[entry.source]
    return OfflineError(
        f"model {entry.name!r} is not on this machine and cannot be downloaded ({reason}). It comes from {where}. "
        f"To get it: run `zoo download {entry.name}` on a machine with network and copy its cache here "
        f"(the HF cache, or set ZOO_HF_CACHE / ZOO_HOME to the copied folders); or put the repo folder under "
        f"a directory named by ZOO_HUB; or pass a local repo folder to zoo.load(path)."
    )


# ----------------------------------------------------------------------------- verification
def _marker(path: Path) -> Path:
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()
    return zoo_home() / "verified" / key


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ino}"


def verify_file(path: Path, spec: FileSpec, *, delete_bad: bool) -> None:
    """Check ``path`` against ``spec``; on mismatch delete it (if ``delete_bad``) and raise IntegrityError."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{spec.path}: expected at {path}, but it is missing")
    marker = _marker(path)
    stat_key = _stat_key(path)
    if spec.sha256 and marker.exists() and marker.read_text() == f"{spec.sha256} {stat_key}":
        return
    size = path.stat().st_size
    actual = sha256_file(path) if spec.size is None or size == spec.size else None
    if (spec.size is not None and size != spec.size) or actual != spec.sha256:
        if delete_bad:
            _delete(path)
        detail = f"sha256 {actual}" if actual else f"size {size} bytes (expected {spec.size})"
        raise IntegrityError(
            f"{spec.path}: content does not match its pin (expected sha256 {spec.sha256}, got {detail}). "
            + ("The bad copy was deleted; loading again downloads it afresh." if delete_bad else
               f"The file {path} is part of a folder the zoo does not own: restore it (e.g. `git checkout`).")
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(marker) as tmp:
        tmp.write_text(f"{spec.sha256} {stat_key}")


def _delete(path: Path) -> None:
    """Remove a cached file; for an HF snapshot symlink, remove the blob it points to as well."""
    real = Path(os.path.realpath(path))
    for p in {path, real}:
        try:
            p.unlink()
        except FileNotFoundError:
            pass


# ----------------------------------------------------------------------------- sources
def _fetch_embedded(entry: ModelEntry) -> Path:
    folder = embedded_hub_dir() / entry.repo
    if not folder.is_dir():
        raise _offline_error(entry, f"{folder} does not exist")
    for spec in entry.files:
        verify_file(folder / spec.path, spec, delete_bad=False)
    return folder


def _fetch_hf(entry: ModelEntry, endpoint: str | None, cache_dir: str | None) -> Path:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    offline = is_offline()
    snapshot = None
    for spec in entry.files:
        try:
            local = Path(
                hf_hub_download(
                    entry.repo,
                    spec.path,
                    revision=entry.revision,
                    endpoint=endpoint or hf_endpoint(),
                    cache_dir=cache_dir or hf_cache_dir(),
                    local_files_only=offline,
                    library_name="zoo",
                )
            )
        except LocalEntryNotFoundError as err:
            raise _offline_error(entry, "HF_HUB_OFFLINE is set" if offline else f"no connection: {err}") from None
        except Exception:
            _drop_incomplete(entry, cache_dir)
            raise
        verify_file(local, spec, delete_bad=True)
        root = local
        for _ in Path(spec.path).parts:
            root = root.parent
        snapshot = snapshot or root
    if snapshot is None:
        raise ValueError(f"model {entry.name!r} lists no files")
    return snapshot


def _drop_incomplete(entry: ModelEntry, cache_dir: str | None) -> None:
    """A failed transfer leaves ``*.incomplete`` blobs behind for resuming; never keep a bad partial."""
    from huggingface_hub.constants import HF_HUB_CACHE

    blobs = Path(cache_dir or hf_cache_dir() or HF_HUB_CACHE) / f"models--{entry.repo.replace('/', '--')}" / "blobs"
    for partial in blobs.glob("*.incomplete"):
        partial.unlink(missing_ok=True)


def _download_url(url: str, dest: Path, spec: FileSpec) -> None:
    from tqdm.auto import tqdm

    with atomic_path(dest) as tmp:
        h = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=60) as response, open(tmp, "wb") as out:
            if response.headers.get_content_type() == "text/html":
                # a sign-in or confirmation page instead of the file: never pin or convert it
                raise IntegrityError(
                    f"{url} answered with an HTML page, not the file {spec.path}; the download link may have "
                    "changed: fetch the file by hand and pass it to `zoo convert`"
                )
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=Path(spec.path).name) as bar:
                while block := response.read(1 << 20):
                    out.write(block)
                    h.update(block)
                    bar.update(len(block))
        if spec.sha256 and h.hexdigest() != spec.sha256:
            raise IntegrityError(
                f"{spec.path} from {url}: expected sha256 {spec.sha256}, got {h.hexdigest()}; nothing was kept"
            )


def _upstream_pin(entry: ModelEntry, spec: FileSpec, path: Path) -> FileSpec:
    """Upstream files whose hash was never measured are pinned on first download (trust on first use)."""
    if spec.sha256:
        return spec
    pin_file = zoo_home() / "pins" / f"{entry.name}.json"
    pins = json.loads(pin_file.read_text()) if pin_file.exists() else {}
    if spec.path not in pins:
        pins[spec.path] = {"sha256": sha256_file(path), "size": path.stat().st_size}
        write_json_atomic(pin_file, pins)
    return replace(spec, **pins[spec.path])


def _fetch_upstream(entry: ModelEntry) -> Path:
    downloads = zoo_home() / "downloads" / entry.name
    files: dict[str, Path] = {}
    pinned: dict[str, str] = {}
    for spec in entry.files:
        dest = downloads / spec.path
        if not dest.exists():
            if is_offline():
                raise _offline_error(entry, "ZOO_OFFLINE/HF_HUB_OFFLINE is set")
            try:
                _download_url(spec.url, dest, spec)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                raise _offline_error(entry, f"download of {spec.url} failed: {err}") from None
        spec = _upstream_pin(entry, spec, dest)
        verify_file(dest, spec, delete_bad=True)
        files[spec.path] = dest
        pinned[spec.path] = spec.sha256
    digest = hashlib.sha256(json.dumps(pinned, sort_keys=True).encode()).hexdigest()[:16]
    out = zoo_home() / "converted" / entry.name / digest
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest}.", dir=out.parent))
        try:
            import_object(entry.converter)(files, tmp, entry)
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


# ----------------------------------------------------------------------------- public
def fetch(entry: ModelEntry | str, *, endpoint: str | None = None, cache_dir: str | None = None) -> Path:
    """Return a local folder with every file of ``entry``, each verified against its sha256.

    Safe to call from several processes at once: a per-model file lock serialises the first download.
    """
    if isinstance(entry, str):
        entry = get_entry(entry)
    if entry.source == "embedded":  # read in place: nothing to download, nothing to lock
        return _fetch_embedded(entry)
    locks = zoo_home() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"{entry.name}.lock")):
        if entry.source == "hf":
            return _fetch_hf(entry, endpoint, cache_dir)
        return _fetch_upstream(entry)


def download(name: str, **kwargs) -> Path:
    """Fetch ``name`` into the local cache (for later offline use) and return its folder."""
    return fetch(name, **kwargs)


def hf_entry(repo_id: str, revision: str | None = None, *, endpoint: str | None = None, method: str = "") -> ModelEntry:
    """An ad-hoc entry for any Hub repo at ``revision`` (a branch, tag or commit).

    The Hub's own file metadata stands in for catalog pins: LFS files carry their sha256; small regular files
    are checked against their git blob id after download. The resolved manifest is saved under
    ``$ZOO_HOME/manifests`` so the same repo loads later with no network call.
    """
    manifests = zoo_home() / "manifests" / repo_id.replace("/", "--")
    ref_file = manifests / "refs" / (revision or "main")
    pinned_and_known = ref_file.exists() and len(revision or "") == 40  # a commit id never moves
    if is_offline() or pinned_and_known:
        if not ref_file.exists():
            raise OfflineError(
                f"{repo_id}@{revision or 'main'} was never downloaded here and the network is off; "
                f"run `zoo download hf://{repo_id}` with network first, or pass a local folder to zoo.load"
            )
        manifest = json.loads((manifests / f"{ref_file.read_text().strip()}.json").read_text())
    else:
        manifest = _resolve_manifest(repo_id, revision, endpoint)
        write_json_atomic(manifests / f"{manifest['commit']}.json", manifest)
        for ref in {revision or "main", manifest["commit"]}:
            with atomic_path(manifests / "refs" / ref) as tmp:
                tmp.write_text(manifest["commit"])
    files = tuple(FileSpec(f["path"], f["sha256"], f["size"]) for f in manifest["files"])
    return ModelEntry(
        name=f"hf://{repo_id}@{manifest['commit']}", method=method, source="hf", repo=repo_id,
        revision=manifest["commit"], files=files,
    )


def _resolve_manifest(repo_id: str, revision: str | None, endpoint: str | None) -> dict:
    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi(endpoint=endpoint or hf_endpoint())
    info = api.model_info(repo_id, revision=revision, files_metadata=True)
    files = []
    for sib in info.siblings:
        if not (sib.rfilename.endswith((".safetensors", ".json", ".md", ".yaml", ".txt", ".png", ".svg"))):
            continue  # never fetch pickles or anything else the zoo does not read
        if sib.lfs is not None:
            files.append({"path": sib.rfilename, "sha256": sib.lfs.sha256, "size": sib.lfs.size})
            continue
        local = Path(hf_hub_download(repo_id, sib.rfilename, revision=info.sha, endpoint=endpoint or hf_endpoint(),
                                     cache_dir=hf_cache_dir(), library_name="zoo"))
        data = local.read_bytes()
        git_id = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        if sib.blob_id and git_id != sib.blob_id:
            _delete(local)
            raise IntegrityError(f"{repo_id}/{sib.rfilename}: git blob id {git_id} != {sib.blob_id} from the Hub")
        files.append({"path": sib.rfilename, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    return {"repo": repo_id, "commit": info.sha, "files": files}
