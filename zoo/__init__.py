"""zoo: a PyTorch Lightning model zoo with pretrained checkpoints.

    >>> import zoo
    >>> zoo.list_models()
    >>> model = zoo.load("chess-small-av")

``import zoo`` is cheap: torch, Lightning and the methods are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

from zoo.registry import (FileSpec, ModelEntry, UnknownModelError, info, list_models,  # noqa: E402  (torch-free)
                          register_method, register_model)

# name -> "module:attribute", imported on first use
_LAZY = {"load": "zoo.module:ZooModule.from_pretrained", "publish": "zoo.module:publish",
         "download": "zoo.hub:download", "ZooModule": "zoo.module:ZooModule",
         "IntegrityError": "zoo.errors:IntegrityError", "OfflineError": "zoo.errors:OfflineError"}

__all__ = ["FileSpec", "ModelEntry", "UnknownModelError", "info", "list_models", "register_method", "register_model",
           *_LAZY]

if TYPE_CHECKING:
    from zoo.errors import IntegrityError, OfflineError
    from zoo.hub import download
    from zoo.module import ZooModule, publish

    # typed as ZooModule; EScAIPModule.from_pretrained(name) and the like are typed as their own class
    load = ZooModule.from_pretrained


def __getattr__(name: str):
    if name in _LAZY:
        from zoo.registry import import_object

        return import_object(_LAZY[name])
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names (load, publish, download, ZooModule, ...) live in __getattr__, which dir() cannot see
    return sorted({*globals(), *_LAZY})
