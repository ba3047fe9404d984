"""Where the zoo reads and writes, and how it reaches the Hub: the environment settings, in one place.

``ZOO_HOME`` (downloads, conversions, locks, verified-file marks), ``ZOO_HF_CACHE`` (the HF cache), ``ZOO_HUB`` (the
embedded mirror), ``ZOO_HF_ENDPOINT``, and offline mode. It imports nothing of the zoo.
"""

from __future__ import annotations

import os
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}


def zoo_home() -> Path:
    return Path(os.environ.get("ZOO_HOME") or Path.home() / ".cache" / "zoo")


def embedded_hub_dir() -> Path:
    """``$ZOO_HUB`` or the ``hub/`` folder of the source checkout this package runs from."""
    return Path(os.environ.get("ZOO_HUB") or Path(__file__).resolve().parent.parent / "hub")


def hf_endpoint() -> str | None:
    return os.environ.get("ZOO_HF_ENDPOINT") or None


def hf_cache_dir() -> str | None:
    return os.environ.get("ZOO_HF_CACHE") or None


def hf_cache_root() -> Path:
    """The HF cache the zoo downloads Hub repos into: ``$ZOO_HF_CACHE``, else huggingface_hub's own."""
    from huggingface_hub import constants

    return Path(hf_cache_dir() or constants.HF_HUB_CACHE)


def setting_for(path: str | os.PathLike) -> str | None:
    """The setting that moves the cache ``path`` lies in (``ZOO_HOME`` or ``ZOO_HF_CACHE``), or None."""
    path = Path(os.path.abspath(path))
    for setting, folder in (("ZOO_HOME", zoo_home()), ("ZOO_HF_CACHE", hf_cache_root())):
        if path.is_relative_to(os.path.abspath(folder)):
            return setting
    return None


def downloads_dir(name: str) -> Path:
    """Where the official files of model ``name`` that are not on the Hub are downloaded (or placed by hand)."""
    return zoo_home() / "downloads" / name


OFFLINE_REASON = "ZOO_OFFLINE/HF_HUB_OFFLINE is set"


def is_offline() -> bool:
    return any(os.environ.get(v, "").lower() in _TRUE for v in ("HF_HUB_OFFLINE", "ZOO_OFFLINE"))
