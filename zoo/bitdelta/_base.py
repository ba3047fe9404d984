"""Finding and loading the model a delta applies to: a zoo model or a Hugging Face causal LM."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from zoo.bitdelta.delta import check_same_kind
from zoo.io import CONFIG_NAME, dtype_name

__all__ = ["load_model", "load_pair", "is_zoo_ref", "default_tokenizer", "base_source"]


def is_zoo_ref(ref: str) -> bool:
    """A zoo catalog name, ``hf://`` zoo repo, or a local zoo repo folder (vs. a transformers model)."""
    path = Path(ref).expanduser()
    if path.is_dir():
        config = path / CONFIG_NAME
        return config.exists() and "zoo_config_format" in json.loads(config.read_text())
    from zoo.registry import list_models

    return ref.startswith("hf://") or ref in list_models()


def default_tokenizer(*refs: str | None) -> str:
    """The tokenizer of the first of ``refs`` that names one: a model folder with a tokenizer of its own, or a
    Hugging Face repo id (not a zoo model); else bytes (the zoo's byte-level models)."""
    for ref in filter(None, refs):
        path = Path(ref).expanduser()
        if path.is_dir() and any((path / name).exists() for name in ("tokenizer.json", "tokenizer_config.json")):
            return str(path)
        if not path.is_dir() and not is_zoo_ref(ref):
            return ref
    return "bytes"


def _beside(ref: str, folder: str | os.PathLike | None) -> str:
    """``ref``, or the folder it names relative to ``folder`` (a delta naming its base as ``../base``)."""
    if folder is not None and not Path(ref).is_absolute() and (Path(folder) / ref).is_dir():
        return str((Path(folder) / ref).resolve())
    return ref


def base_source(base: str | os.PathLike | nn.Module | None, named: str | None, folder: Path) -> str | None:
    """Where a delta's base, and so its tokenizer, comes from: ``base`` as given (a name or folder), else the base
    the delta in ``folder`` names."""
    if isinstance(base, (str, os.PathLike)):
        return str(base)
    return _beside(named, folder) if base is None and named else named


def load_model(ref: str | os.PathLike | nn.Module, *, revision: str | None = None,
               dtype: str | torch.dtype | None = None, device: str | torch.device = "cpu",
               relative_to: str | os.PathLike | None = None) -> nn.Module:
    """Load a base or fine-tuned model in eval mode: ``ref`` is a zoo catalog name / zoo repo folder (``zoo.load``),
    a ``zoo train`` / ``zoo finetune`` checkpoint (``.ckpt``), a local Hugging Face folder, or a Hugging Face repo id
    (``AutoModelForCausalLM``, at ``revision``). A relative folder is looked up beside ``relative_to`` first."""
    if isinstance(ref, nn.Module):
        return ref
    from zoo.module import parse_dtype

    dtype = parse_dtype(dtype)
    ref = _beside(str(ref), relative_to)
    with torch.device("cpu"):  # also when a checkpoint loader builds us under the meta device
        if is_zoo_ref(ref) or (ref.endswith(".ckpt") and Path(ref).expanduser().is_file()):
            from zoo import load

            return load(ref, revision=revision, dtype=dtype, device=device).eval()
        path_like = Path(ref).is_absolute() or ref.startswith(("./", "../", "~"))  # not a Hugging Face repo id
        if path_like and not Path(ref).expanduser().exists():
            raise FileNotFoundError(f"cannot load the model {ref!r}: there is no such folder")
        from transformers import AutoModelForCausalLM

        try:
            model = AutoModelForCausalLM.from_pretrained(ref, revision=revision, dtype=dtype or torch.float32)
        except OSError as err:
            raise FileNotFoundError(f"cannot load the model {ref!r}: it is neither a zoo model (see `zoo list`), a "
                                    f"local folder, nor a reachable Hugging Face repo ({err}). Pass a local folder, "
                                    "e.g. base=<path> / --base PATH.") from None
    return model.to(device).eval()


def load_pair(base: str | os.PathLike | nn.Module, finetune: str | os.PathLike | nn.Module, *,
              dtype: str | torch.dtype | None = None, base_revision: str | None = None,
              finetune_revision: str | None = None, note: Callable[[str], Any] | None = None,
              ) -> tuple[nn.Module, nn.Module]:
    """The base and the fine-tune to compress against it, both in ``dtype``, else in the wider of their stored dtypes:
    the delta then applies where the fine-tune ran (a float32 fine-tune's updates smaller than a bfloat16 step would
    round away in a bfloat16 base). Models passed in are not changed (a copy is cast); ``note`` is told of a cast."""
    finetune_model = load_model(finetune, revision=finetune_revision, dtype=dtype)
    base_model = load_model(base, revision=base_revision, dtype=dtype)
    check_same_kind(base_model, finetune_model)
    # each model's dtype: that of its first floating parameter
    base_dtype, finetune_dtype = (next(p.dtype for p in m.parameters() if p.is_floating_point())
                                  for m in (base_model, finetune_model))
    wide = torch.promote_types(base_dtype, finetune_dtype)
    if note is not None and base_dtype != finetune_dtype:
        names = [dtype_name(d) for d in (finetune_dtype, base_dtype, wide)]
        note(f"note: the fine-tune is {names[0]}, its base {names[1]}: both are compared in {names[2]} (exact), and the "
             f"delta applies to the base in {names[2]}, where the fine-tune's smallest updates do not round away")
    # an upcast is exact: the base cast to ``wide`` is the one zoo.load(base, dtype=wide) gives the delta
    if base_dtype != wide:
        base_model = (copy.deepcopy(base_model) if base_model is base else base_model).to(wide)
    if finetune_dtype != wide:
        finetune_model = (copy.deepcopy(finetune_model) if finetune_model is finetune else finetune_model).to(wide)
    return base_model, finetune_model
