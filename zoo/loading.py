"""``zoo.load``: a catalog name, a Hub repo or a local folder in, a ready LightningModule out."""

from __future__ import annotations

import os

import torch

from zoo.hub import resolve_repo
from zoo.module import ZooModule, parse_dtype, read_config

__all__ = ["load", "resolve_repo", "parse_dtype", "read_config"]


def load(
    name_or_path: str | os.PathLike,
    *,
    revision: str | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    **kwargs,
) -> ZooModule:
    """Load a pretrained model as its method's LightningModule, in eval mode.

    ``name_or_path`` is a catalog name (see ``zoo.list_models()``), ``hf://owner/repo[@revision]``, or a
    local folder holding ``config.json`` and ``model.safetensors``. The module is built on the meta device
    and the weights are assigned strictly, so no random init runs and the weights exist once in memory.
    Extra keyword arguments go to the method (e.g. ``merged=False`` for BitDelta deltas).
    """
    return ZooModule.from_pretrained(name_or_path, revision=revision, device=device, dtype=dtype, **kwargs)
