"""``zoo.load``: a catalog name, a Hub repo or a local folder in, a ready LightningModule out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from zoo._io import CONFIG_NAME
from zoo.errors import ConfigError
from zoo.hub import resolve_repo
from zoo.hparams import check_arguments, closest, reading_saved_config
from zoo.module import CONFIG_FORMAT, ZooModule
from zoo.registry import methods, resolve_module_class

__all__ = ["load", "resolve_repo", "parse_dtype", "read_config"]

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


_FIX = "Correct that file, or get a good copy of the repo (download it again, or publish it again from its source)"


def read_config(config_path: Path) -> dict:
    """A repo's ``config.json``, checked: valid JSON holding ``model_type`` and ``hparams``, in a format this zoo
    reads. Every problem is a ConfigError that names the file."""
    if not config_path.exists():
        raise FileNotFoundError(f"{config_path.parent} has no {CONFIG_NAME}; it is not a zoo repo folder")
    try:
        config = json.loads(config_path.read_bytes())
    except ValueError as err:  # JSONDecodeError, or bytes that are not UTF-8
        raise ConfigError(f"{config_path} is not valid JSON ({err}). {_FIX}", path=config_path) from None
    if not isinstance(config, dict):
        raise ConfigError(f"{config_path} holds a JSON {type(config).__name__}, not an object. {_FIX}",
                          path=config_path)
    version = config.get("zoo_config_format", CONFIG_FORMAT)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(f"{config_path}: zoo_config_format must be a positive integer, got {version!r}. {_FIX}",
                          path=config_path)
    if version > CONFIG_FORMAT:
        from zoo import __version__

        raise ConfigError(
            f"{config_path} was written by a newer zoo (zoo_config_format {version}, zoo "
            f"{config.get('zoo_version', '?')}); this zoo {__version__} reads format {CONFIG_FORMAT} and older: "
            "upgrade with pip install -U lightning-zoo", path=config_path)
    for key in ("model_type", "hparams"):
        if key not in config:
            raise ConfigError(f"{config_path} lacks {key!r}: it was not written by ZooModule.save_pretrained",
                              path=config_path)
    if not isinstance(config["hparams"], dict):
        raise ConfigError(f"{config_path}: hparams must be a JSON object, got {config['hparams']!r}. {_FIX}",
                          path=config_path)
    return config


def _module_class(config: dict, config_path: Path) -> type[ZooModule]:
    model_type = config["model_type"]
    known = sorted(t for spec in methods().values() for t in spec.modules)
    if model_type not in known:
        close = closest(str(model_type), known)
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        raise ConfigError(
            f"{config_path}: unknown model_type {model_type!r}{hint}; the installed methods register "
            f"{', '.join(known)}. Correct the file, or install the package of the method that wrote it",
            path=config_path)
    return resolve_module_class(model_type)


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
    config = read_config(config_path)
    cls = _module_class(config, config_path)
    try:
        with reading_saved_config():
            check_arguments(cls, config["hparams"], "hparams", cls.__name__)
            model = cls.from_repo_dir(
                directory,
                config["hparams"],
                device=torch.device(device or "cpu"),
                dtype=parse_dtype(dtype),
                **kwargs,
            )
    except ConfigError as err:
        if err.path is not None:  # another repo's config (a delta's base, say) names its own file
            raise
        raise ConfigError(f"{config_path}: {err}. {_FIX}", path=config_path) from None
    model.zoo_source = str(name_or_path)
    return model.eval()
