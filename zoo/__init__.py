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
    import os
    from typing import Any, Literal, overload

    import torch

    from zoo.bitdelta.module import BitDeltaModule, CausalLM
    from zoo.chess.module import ChessTransformerModule
    from zoo.escaip.module import EScAIPModule
    from zoo.hub import IntegrityError, OfflineError, download
    from zoo.module import ZooModule
    from zoo.publishing import publish
    from zoo.rcg.pipeline import RCGPipeline

    # zoo.load's return type by catalog name, so that e.g. zoo.load("escaip-tiny-emt").as_calculator() type-checks;
    # tests/core/test_typing.py keeps these lists equal to the catalog and each class to what the model loads as
    @overload
    def load(name_or_path: Literal["chess-136m", "chess-270m", "chess-9m", "chess-9m-bc", "chess-9m-sv",
                                   "chess-small-av", "chess-small-bc", "chess-small-sv"], *,
             revision: str | None = None, device: str | torch.device | None = None,
             dtype: str | torch.dtype | None = None, **kwargs: Any) -> ChessTransformerModule: ...
    @overload
    def load(name_or_path: Literal["escaip-qm9-xtb", "escaip-small-xtb", "escaip-tiny-emt"], *,
             revision: str | None = None, device: str | torch.device | None = None,
             dtype: str | torch.dtype | None = None, **kwargs: Any) -> EScAIPModule: ...
    @overload
    def load(name_or_path: Literal["rcg-fashionmnist", "rcg-imagenet256", "rcg-imagenet256-classcond",
                                   "rcg-imagenet256-mage-b", "rcg-imagenet256-mage-b-classcond"], *,
             revision: str | None = None, device: str | torch.device | None = None,
             dtype: str | torch.dtype | None = None, **kwargs: Any) -> RCGPipeline: ...
    @overload
    def load(name_or_path: Literal["llama-bytes-3m"], *,
             revision: str | None = None, device: str | torch.device | None = None,
             dtype: str | torch.dtype | None = None, **kwargs: Any) -> CausalLM: ...
    @overload
    def load(name_or_path: Literal["bitdelta-mistral-7b-dolphin-2.2.1", "bitdelta-mistral-7b-instruct-v0.1",
                                   "bitdelta-mistral-7b-openchat-3.5", "bitdelta-mistral-7b-openhermes-2",
                                   "bitdelta-mistral-7b-openorca", "bitdelta-mistral-7b-zephyr-7b-beta",
                                   "llama-bytes-3m-austen-bitdelta", "llama-bytes-3m-milton-bitdelta"], *,
             revision: str | None = None, device: str | torch.device | None = None,
             dtype: str | torch.dtype | None = None, **kwargs: Any) -> BitDeltaModule: ...
    @overload
    def load(name_or_path: str | os.PathLike, *,
             revision: str | None = None, device: str | torch.device | None = None,
             dtype: str | torch.dtype | None = None, **kwargs: Any) -> ZooModule: ...
    def load(name_or_path, *, revision=None, device=None, dtype=None, **kwargs): ...


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names (load, publish, download, ZooModule, ...) live in __getattr__, which dir() cannot see
    return sorted({*globals(), *_LAZY})
