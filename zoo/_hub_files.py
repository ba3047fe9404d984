"""One file of a Hub repo on local disk, checked: the HF cache's copy when it is intact (no network call), else a
download through the HF cache judged by a check, and downloaded once more when the transfer damaged it. Also the
quick answer to whether the Hub can be reached at all (:func:`unreachable_hub`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from zoo._hub_errors import hub_errors
from zoo._verify import delete_copy, matches
from zoo.errors import IntegrityError, OfflineError
from zoo.registry import FileSpec
from zoo.settings import OFFLINE_REASON, hf_cache_dir, hf_endpoint, is_offline


class NotCached(Exception):
    """A pinned file is not (or not intact) in the local cache: it has to be downloaded."""


@dataclass(frozen=True)
class Done:
    """The downloaded copy is good."""


@dataclass(frozen=True)
class Retry:
    """The copy is damaged: it is deleted and downloaded once more, and ``error`` is raised if that copy is too."""

    error: IntegrityError


@dataclass(frozen=True)
class Fail:
    """The copy is deleted and ``error`` raised at once: downloading it again would not mend it."""

    error: Exception


Verdict = Done | Retry | Fail


def _hf_download(repo_id: str, path: str, revision: str, *, local_only: bool = False) -> Path:
    from huggingface_hub import hf_hub_download

    with hub_errors(repo_id, revision, path):
        return Path(hf_hub_download(repo_id, path, revision=revision, endpoint=hf_endpoint(),
                                    cache_dir=hf_cache_dir(), local_files_only=local_only, library_name="zoo"))


def cached(repo_id: str, path: str, revision: str, spec: FileSpec) -> Path:
    """The HF cache's copy of ``path`` if it holds exactly ``spec``'s bytes (no network call), else NotCached; a
    truncated or altered copy is deleted, never used."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        local = _hf_download(repo_id, path, revision, local_only=True)
    except OfflineError as err:
        if isinstance(err.__context__, LocalEntryNotFoundError):
            raise NotCached from None
        raise
    if not matches(local, spec):
        delete_copy(local)
        raise NotCached
    return local


def in_hf_cache(repo_id: str, path: str, revision: str) -> bool:
    """Whether the HF cache holds ``path`` of ``repo_id`` at ``revision`` (no network call; its bytes unchecked)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, path, cache_dir=hf_cache_dir(), revision=revision), str)


def download_checked(repo_id: str, path: str, revision: str, check: Callable[[Path], Verdict], *,
                     local_only: bool = False) -> Path:
    """``path`` of a Hub repo through the HF cache, kept only when ``check(local)`` says :class:`Done`."""
    local = _hf_download(repo_id, path, revision, local_only=local_only)
    verdict = check(local)
    if isinstance(verdict, Retry):  # a transfer can be damaged: once more
        delete_copy(local)
        local = _hf_download(repo_id, path, revision, local_only=local_only)
        verdict = check(local)
    if isinstance(verdict, Done):
        return local
    delete_copy(local)
    raise verdict.error


def unreachable_hub() -> str | None:
    """Why the Hub cannot be reached now: offline mode, or one failed connection attempt; None when it can, or when a
    proxy is set (it may reach what this machine cannot). With no network huggingface_hub retries each file for about
    25 s (pauses of 1, 2, 4, 8 and 8 s) before giving up."""
    import socket
    import urllib.request
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    if is_offline():
        return OFFLINE_REASON
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
