"""The hub layer: get a model's files onto local disk, verified, wherever they live, and put a repo on the Hub.

A catalog entry's zoo repo (config.json, safetensors, card) is pinned by sha256 and size. It is read from the
**embedded mirror** ``$ZOO_HUB/<name>`` when that folder exists; else from its **Hub home** ``<ZOO_HF_ORG>/<name>``
through the HF cache, at the pinned commit or at ``main`` (the pins make a moving ``main`` safe); else, for an entry
not released yet, from the authors' **upstream** files, downloaded and converted once (:mod:`zoo._download`). Any
other Hub repo loads as ``hf://owner/name[@revision]``, checked against the Hub's own hashes.

Nothing unverified reaches a model (:mod:`zoo._verify`): a damaged cache copy is fetched again, a damaged transfer
is retried once, and a Hub repo serving other content than this release pinned raises :class:`RepoChangedError`.
One file lock per Hub repo (and per upstream model) serialises downloads between processes; with a read-only
``ZOO_HOME`` the locks and verified-file marks are skipped, so a load whose files are at hand needs no write.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Iterator

from filelock import FileLock

from zoo._download import fetch_upstream
from zoo._hub_errors import hub_errors, offline_error
from zoo._hub_files import Done, Fail, NotCached, Retry, Verdict, cached, download_checked, in_hf_cache
from zoo._hub_files import unreachable_hub
from zoo._verify import file_pin, git_blob_id, home_unwritable, matches_server_claim, mismatch, remember, verify_file
from zoo.errors import DownloadError, HubError, IntegrityError, OfflineError, RepoChangedError
from zoo.io import check_space, write_json_atomic, write_text_atomic
from zoo.registry import FileSpec, ModelEntry, get_entry, is_hex
from zoo.settings import embedded_hub_dir, hf_cache_dir, hf_cache_root, hf_endpoint, is_offline, zoo_home

__all__ = ["IntegrityError", "RepoChangedError", "OfflineError", "HubError", "DownloadError", "download", "fetch",
           "fetch_hf", "resolve_repo", "upload_folder", "where", "zoo_home", "embedded_hub_dir", "is_offline",
           "hf_endpoint", "hf_cache_dir", "hub_errors"]

# never fetched from a Hub repo: the zoo reads safetensors and never unpickles
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")


def where(entry: ModelEntry) -> str:
    """Where ``entry`` loads from on this machine: ``embedded`` (a local mirror folder), ``hub`` or ``upstream``."""
    if entry.released:
        return "embedded" if (embedded_hub_dir() / entry.name).is_dir() else "hub"
    return "upstream"


@contextlib.contextmanager
def _lock(kind: str, key: str) -> Iterator[None]:
    """One lock per Hub repo (every model and manifest of that repo) or per upstream model, across processes; none
    where ZOO_HOME is read-only (the HF cache's own locks still guard its downloads)."""
    locks = zoo_home() / "locks"
    with contextlib.ExitStack() as held:
        try:
            locks.mkdir(parents=True, exist_ok=True)
            held.enter_context(FileLock(str(locks / f"{kind}--{key.replace('/', '--')}.lock")))
        except OSError as err:
            home_unwritable(err)
        yield


# ----------------------------------------------------------------------------- pinned Hub repos
def _hub_file(repo_id: str, spec: FileSpec, revision: str) -> Path:
    """One pinned file of a Hub repo, downloaded and verified (downloaded once more if damaged)."""

    def check(local: Path) -> Verdict:
        if (message := mismatch(spec, local)) is None:
            return Done()
        if matches_server_claim(local):  # the server stands by these bytes: the repo changed, not the transfer
            return Fail(RepoChangedError(
                f"{message}: Hub repo {repo_id}@{revision} serves a different {spec.path} than this zoo release "
                "pinned, so this Hub repo changed since this zoo release. Upgrade the zoo (`pip install -U "
                "lightning-zoo`), or load the commit this release was made from with revision=<commit>."))
        return Retry(IntegrityError(f"{message}, twice in a row from {repo_id}@{revision}: the transfer or the server "
                                    "is damaging the file. Nothing was kept; try again later or from another mirror."))

    return download_checked(repo_id, spec.path, revision, check)


def _hub_snapshot(entry: ModelEntry, revision: str, *, local_only: bool) -> Path:
    snapshot = None
    for spec in entry.files:
        local = (cached(entry.hub_repo, spec.path, revision, spec) if local_only
                 else _hub_file(entry.hub_repo, spec, revision))
        if snapshot is None:
            snapshot = local.parents[len(Path(spec.path).parts) - 1]  # the snapshot folder holding spec.path
            revision = snapshot.name  # the commit a branch resolved to: every file comes from that one commit
    return snapshot


def _fetch_hub(entry: ModelEntry) -> Path:
    """A released entry from its Hub home: no network call when every pinned file is cached and intact."""
    revision = entry.revision or "main"
    with contextlib.suppress(NotCached):
        return _hub_snapshot(entry, revision, local_only=True)
    if (unreachable := unreachable_hub()) is not None:
        raise offline_error(entry, unreachable)
    missing = [spec for spec in entry.files if not in_hf_cache(entry.hub_repo, spec.path, revision)]
    check_space(hf_cache_root(), sum(spec.size or 0 for spec in missing), f"downloading {entry.name}")
    try:
        return _hub_snapshot(entry, revision, local_only=False)
    except OfflineError as err:
        raise offline_error(entry, str(err)) from None


# ----------------------------------------------------------------------------- any Hub repo (hf://)
def fetch_hf(repo_id: str, revision: str | None = None) -> Path:
    """Any Hub repo at ``revision`` (branch, tag or commit; default ``main``), verified against the Hub's hashes (an
    LFS file's sha256, a regular file's git blob id) in place of catalog pins. The manifest is saved under
    ``$ZOO_HOME/manifests``: a commit loads later with no network call, a branch from its last manifest when offline.
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
    last_seen = manifests / f"{ref_file.read_text().strip()}.json" if ref_file.exists() else None
    if last_seen and (is_hex(revision, 40) or is_offline()):  # a commit never moves
        manifest = json.loads(last_seen.read_text())
    else:
        try:
            if (unreachable := unreachable_hub()) is not None:
                raise OfflineError(unreachable)
            manifest = _resolve_manifest(repo_id, revision)
        except OfflineError as err:
            if not last_seen:
                raise OfflineError(f"hf://{repo_id}@{revision} was never downloaded here and the Hub is out of reach "
                                   f"({err}); run `zoo download hf://{repo_id}` with network first, or pass a local "
                                   "folder to zoo.load") from None
            manifest = json.loads(last_seen.read_text())  # the network is down: serve the branch as last seen
        else:
            write_json_atomic(manifests / f"{manifest['commit']}.json", manifest)
            for ref in {revision, manifest["commit"]}:
                write_text_atomic(manifests / "refs" / ref, manifest["commit"])
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
    wrong = Retry(IntegrityError(f"hf://{repo_id}/{path}: git blob id of the downloaded bytes is not {blob_id} from "
                                 "the Hub, twice in a row; nothing was kept"))
    local = download_checked(repo_id, path, commit, lambda local: Done() if git_blob_id(local) == blob_id else wrong)
    pin = file_pin(local)
    remember(local, pin["sha256"])  # the load that follows checks it against this pin without hashing again
    return pin


# ----------------------------------------------------------------------------- public
def fetch(entry: ModelEntry) -> Path:
    """A local folder with every file of ``entry``, each verified against its sha256; safe to call from several
    processes at once (a file lock per Hub repo, or per model for upstream files, serialises the first download)."""
    if entry.released:
        mirror = embedded_hub_dir() / entry.name
        if mirror.is_dir():  # read in place: nothing to download, nothing to lock
            for spec in entry.files:
                verify_file(mirror / spec.path, spec, delete_bad=False)
            return mirror
        with _lock("hf", entry.hub_repo):
            return _fetch_hub(entry)
    with _lock("upstream", entry.name):
        return fetch_upstream(entry)


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
        raise FileNotFoundError(f"{path} is not a folder (a zoo repo folder holds config.json + model.safetensors); "
                                "for a Hugging Face repo write hf://owner/repo")
    entry = get_entry(text)
    if revision is not None and revision != entry.revision:
        if not entry.released:
            raise ValueError(f"model {entry.name!r} is converted from its official files, which have no revisions")
        return fetch_hf(entry.hub_repo, revision)  # another commit: verified by the Hub's own hashes
    return fetch(entry)


# zoo.download: a catalog name or hf://owner/repo[@revision] fetched into the local cache; returns its folder
download = resolve_repo


def upload_folder(folder: Path, repo_id: str, *, message: str, endpoint: str | None = None, token: str | None = None,
                  private: bool = False) -> str:
    """Upload ``folder`` to the Hub repo ``repo_id`` (created if missing) as one commit; returns the commit id."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint or hf_endpoint(), token=token)
    with hub_errors(repo_id, upload=True, endpoint=api.endpoint):  # the error names the Hub this call used
        api.create_repo(repo_id, exist_ok=True, private=private)
        return api.upload_folder(repo_id=repo_id, folder_path=str(folder), commit_message=message).oid
