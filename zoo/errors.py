"""The zoo's exceptions. Every one of them is a user-facing problem: the CLI prints it as one ``zoo: error:`` line.

Torch-free, so the CLI can catch them without importing a model stack. Each message names the file or model and
the fix. Where a caller may already catch a builtin (``ValueError``, ``FileNotFoundError``), the zoo's error
subclasses it too.
"""

from __future__ import annotations

__all__ = ["ZooError", "HubError", "IntegrityError", "RepoChangedError", "OfflineError", "DownloadError"]


class ZooError(Exception):
    """Base of every error the zoo raises on purpose (bad input, missing or damaged files, network trouble)."""


class HubError(ZooError, RuntimeError):
    """The Hugging Face Hub (or a mirror of it) answered with an error: missing repo or file, wrong revision,
    no access, or a server fault."""


class IntegrityError(ZooError, RuntimeError):
    """A file's content does not match its pinned sha256 (or size)."""


class RepoChangedError(IntegrityError):
    """A Hub repo serves a file that differs from this zoo release's pin (the repo moved on since the release)."""


class OfflineError(ZooError, RuntimeError):
    """A model is needed that is not on this machine and cannot be downloaded now."""


class DownloadError(ZooError, RuntimeError):
    """A download was refused or failed for a reason other than the network being down (HTTP 403/404/429, ...)."""
