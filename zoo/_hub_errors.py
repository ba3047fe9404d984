"""Hub failures as zoo errors: what ``huggingface_hub`` raises (a missing repo or file, no access, a server fault,
no network) becomes one :class:`~zoo.errors.HubError` or :class:`~zoo.errors.OfflineError` whose message names the
repo and the fix, or a :class:`~zoo.errors.StorageError` when the HF cache's disk refuses a write. A catalog model
that cannot be had now is one :func:`offline_error` saying how to get it."""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator

from zoo.errors import HubError, OfflineError
from zoo.io import storage_error
from zoo.registry import ModelEntry
from zoo.settings import downloads_dir, embedded_hub_dir, hf_cache_root, hf_endpoint

RETRY_STATUS = {429, 500, 502, 503, 504}  # HTTP answers worth asking again, later
_NETWORK_ERRORS = {"TransportError", "ConnectError", "NetworkError", "TimeoutException", "ConnectTimeout",
                   "ReadTimeout", "RemoteProtocolError", "ReadError", "OfflineModeIsEnabled"}


def _is_network_error(err: BaseException) -> bool:
    if isinstance(err, (ConnectionError, TimeoutError)):
        return True
    return any(cls.__name__ in _NETWORK_ERRORS for cls in type(err).__mro__)


def _hub_error(err: BaseException, repo_id: str, revision: str | None, path: str | None = None,
               *, upload: bool = False, endpoint: str | None = None) -> Exception | None:
    """The zoo error for a ``huggingface_hub`` failure, or None when it is not a Hub failure."""
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError,
                                        RemoteEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError)

    at = f"{repo_id}@{revision or 'main'}"
    endpoint = endpoint or hf_endpoint() or "https://huggingface.co"
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
               upload: bool = False, endpoint: str | None = None) -> Iterator[None]:
    """Turn any ``huggingface_hub`` failure inside the block into one zoo error (``HubError``/``OfflineError``, or a
    ``StorageError`` when the HF cache's disk is full or read-only). The client's retry warnings ("Retrying in 2s")
    are held back meanwhile: when the retries fail, the zoo error says what happened in one line."""
    client_log = logging.getLogger("huggingface_hub")
    level = client_log.level
    client_log.setLevel(logging.ERROR)
    try:
        yield
    except Exception as err:  # noqa: BLE001  (translated or re-raised as is)
        translated = _hub_error(err, repo_id, revision, path, upload=upload, endpoint=endpoint)
        if translated is None and isinstance(err, OSError):
            # the client's failed write names no file, or a symlink's relative target: name the cache then
            where = err.filename if err.filename and os.path.isabs(err.filename) else hf_cache_root()
            translated = storage_error(err, where)
        if translated is None:
            raise
        raise translated from None
    finally:
        client_log.setLevel(level)


def offline_error(entry: ModelEntry, reason: str) -> OfflineError:
    """The error for a catalog model that is not on this machine and cannot be downloaded now (``reason``): where it
    comes from, and every way to get it."""
    if entry.released:
        # an installed zoo has no hub/ of a checkout to put a repo into: then the way is a mirror folder of one's own
        mirror = (f"put the repo folder at {embedded_hub_dir() / entry.name}"
                  if os.environ.get("ZOO_HUB") or embedded_hub_dir().is_dir()
                  else f"set ZOO_HUB to a mirror folder holding the repo as {entry.name}/")
        source = f"the Hugging Face repo {entry.hub_repo}@{entry.revision or 'main'}"
        ways = (f"run `zoo download {entry.name}` on a machine with network and copy its HF cache to {hf_cache_root()} "
                f"(or set ZOO_HF_CACHE to the copied folder); or {mirror}; or set ZOO_HF_ENDPOINT to a Hub mirror")
    else:
        source, folder = "the official upstream files", downloads_dir(entry.name)
        ways = f"run `zoo download {entry.name}` with network, or place the official files in {folder}"
    return OfflineError(f"model {entry.name!r} is not on this machine and cannot be downloaded ({reason}). It comes "
                        f"from {source}. To get it: {ways}; or pass a local repo folder to zoo.load(path).")
