"""The zoo's exceptions. Every one of them is a user-facing problem: the CLI prints it as one ``zoo: error:`` line.

Torch-free, so the CLI can catch them without importing a model stack. Each message names the file or model and the fix.
Where a caller may already catch a builtin (``ValueError``, ``FileNotFoundError``), the zoo's error subclasses it too.
"""

from __future__ import annotations

__all__ = ["ZooError", "HubError", "IntegrityError", "RepoChangedError", "OfflineError", "DownloadError", "ConfigError",
           "DamagedFileError", "CardError", "InputError", "StorageError", "DiskFullError", "ReadOnlyError",
           "InstallError"]


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


class ConfigError(ZooError, ValueError):
    """A model's config cannot be used: config.json is not valid JSON, names an unknown ``model_type`` or a newer
    ``zoo_config_format``, or its hyperparameters have an unknown key or a value of the wrong type. ``path`` is the
    config file when known (a nested decoder raises without it; ``zoo.load`` adds it)."""

    def __init__(self, message: str, path: object = None):
        super().__init__(message)
        self.path = path


class DamagedFileError(IntegrityError):
    """A model file cannot be read: truncated or corrupt, as after a broken download or copy."""


class CardError(ZooError, ValueError):
    """A model card (``zoo publish --card``) has an unknown field or a field of the wrong shape."""


class InputError(ZooError, ValueError):
    """A file given to a command as input cannot be used (not an image, the wrong size, ...)."""


class StorageError(ZooError, OSError):
    """This machine refused a write: its disk is full, or the place is read-only. ``path`` is where; the message
    says the fix. Nothing half-written is left behind. An ``OSError``, as the refusal was."""

    def __init__(self, message: str, path: object = None, errno: int | None = None):
        super().__init__(message)
        self.path = path
        self.errno, self.filename = errno, path

    def __str__(self) -> str:  # the message alone, not OSError's "[Errno N] strerror: filename"
        return self.args[0]

    def __reduce__(self):  # OSError pickles its args alone: keep path and errno (make-data's workers send it back)
        return type(self), (str(self), self.path, self.errno)


class DiskFullError(StorageError):
    """Not enough free space: found before writing, where the size is known, or when the disk filled up."""


class ReadOnlyError(StorageError):
    """A place the zoo had to write to is read-only or not writable (a container, a shared install)."""


class InstallError(ZooError, RuntimeError):
    """Installed packages that cannot work together (a torchvision built for another torch)."""
