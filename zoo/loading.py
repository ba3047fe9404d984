"""``zoo.load``: a catalog name, a Hub repo or a local folder in, a ready LightningModule out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from zoo._io import CONFIG_NAME
from zoo.hub import resolve_repo
from zoo.module import ZooModule
from zoo.registry import resolve_module_class

__all__ = ["load", "resolve_repo", "parse_dtype"]

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float64": torch.float64, "fp64": torch.float64, "double": torch.float64,
}


def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[str(dtype).removeprefix("torch.")]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)}") from None


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
    directory = resolve_repo(name_or_path, revision=revision)
    config_path = directory / CONFIG_NAME
    if not config_path.exists():
        raise FileNotFoundError(f"{directory} has no {CONFIG_NAME}; it is not a zoo repo folder")
    config = json.loads(config_path.read_text())
    for key in ("model_type", "hparams"):
        if key not in config:
            raise ValueError(f"{config_path} lacks {key!r}: it was not written by ZooModule.save_pretrained")
    cls = resolve_module_class(config["model_type"])
    model = cls.from_repo_dir(
        directory,
        config["hparams"],
        device=torch.device(device or "cpu"),
        dtype=parse_dtype(dtype),
        **kwargs,
    )
    model.zoo_source = str(name_or_path)
    return model.eval()
