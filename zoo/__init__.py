"""zoo: a PyTorch Lightning model zoo with pretrained checkpoints.

    >>> import zoo
    >>> zoo.list_models()
    >>> model = zoo.load("chess-small-av")

``import zoo`` is cheap: torch, Lightning and the methods are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

from zoo.registry import (  # noqa: E402  (torch-free)
    FileSpec,
    ModelEntry,
    UnknownModelError,
    info,
    list_models,
    register_method,
    register_model,
)

_LAZY = {
    "load": "zoo.loading",
    "publish": "zoo.publishing",
    "download": "zoo.hub",
    "ZooModule": "zoo.module",
    "IntegrityError": "zoo.hub",
    "OfflineError": "zoo.hub",
}

__all__ = [
    "FileSpec",
    "ModelEntry",
    "UnknownModelError",
    "info",
    "list_models",
    "register_method",
    "register_model",
    *_LAZY,
]

if TYPE_CHECKING:
    from zoo.hub import IntegrityError, OfflineError, download
    from zoo.loading import load
    from zoo.module import ZooModule
    from zoo.publishing import publish


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")
