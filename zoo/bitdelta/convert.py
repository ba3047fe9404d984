"""Official BitDelta files (``diff.pt`` / ``diff_untrained.pt`` from ``FasterDecoding/BitDelta``) → zoo delta repos.

The official file is a ``torch.save`` pickle of one dict: ``<module>.mask`` (int32 (in/32, out), the same bit
layout as ours), ``<module>.coeff`` (fp32 0-dim ``nn.Parameter``) and every full-precision parameter of the
fine-tune. It is read with :func:`zoo.convert.safe_torch_load`, so nothing but tensors can come out of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from zoo.io import dtype_name, release_pages, releasing_pages, weights_fingerprint
from zoo.bitdelta.delta import BitDelta
from zoo.convert import safe_torch_load, single_file

__all__ = ["read_official", "carried_dtype", "from_official", "convert", "from_upstream"]


def read_official(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The tensors of an official delta file (parameters detached, all contiguous), refusing foreign globals."""
    state = safe_torch_load(path, what="an official BitDelta file")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} is not a dict of tensors; it is not an official BitDelta file")
    return {k: v.detach().contiguous() for k, v in state.items()}


def carried_dtype(state: dict[str, torch.Tensor]) -> torch.dtype | None:
    """The dtype the fine-tune was in: that of the diff's full-precision tensors (None if it carries none)."""
    dtypes = {v.dtype for k, v in state.items() if not k.endswith((".mask", ".coeff")) and v.is_floating_point()}
    if len(dtypes) > 1:
        raise ValueError(f"the diff's full-precision tensors mix {sorted(dtype_name(d) for d in dtypes)}; "
                         "name the dtype of the base explicitly (--base-dtype)")
    return next(iter(dtypes), None)


def _check_no_downcast(params: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
    """The delta runs its carried tensors in the base's dtype: refuse a base in which they would change."""
    for name, value in params.items():
        if value.is_floating_point() and not torch.equal(value.to(dtype).to(value.dtype), value):
            raise ValueError(
                f"the diff carries {dtype_name(value.dtype)} tensors ({name}, ...) that a {dtype_name(dtype)} base "
                f"would round, so the converted delta would not reproduce the official one; load the base in "
                f"{dtype_name(value.dtype)} (--base-dtype {dtype_name(value.dtype)}, the default: the diff's own dtype)")


def _same_as_base(base: torch.Tensor | None, value: torch.Tensor) -> bool:
    same = base is not None and base.shape == value.shape and torch.equal(base.to(value.dtype), value)
    release_pages(value)  # an mmap-ed diff's tensor: back to the file until it is written
    return same


def from_official(state: dict[str, torch.Tensor], *, base: str | None, base_model: nn.Module | None = None,
                  base_revision: str | None = None) -> BitDelta:
    """An official delta dict as a :class:`BitDelta`.

    With ``base_model`` (the base the file was made against) it records the base's fingerprint and drops
    full-precision tensors equal to the base's (the official file carries all of them); without it, loading checks
    the base's layer shapes only. A base in a dtype that would round the diff's tensors is refused."""
    modules = [k[: -len(".mask")] for k in state if k.endswith(".mask")]
    if not modules:
        raise ValueError("no '<module>.mask' tensors: this is not an official BitDelta file")
    masks, scales, shapes = {}, {}, {}
    for name in modules:
        mask, coeff = state[f"{name}.mask"], state.get(f"{name}.coeff")
        if coeff is None or coeff.numel() != 1 or mask.dtype != torch.int32 or mask.dim() != 2:
            raise ValueError(f"{name}: expected an int32 (in/32, out) mask and a one-element coeff")
        masks[name], scales[name] = mask, coeff.float().reshape(())
        shapes[name] = (mask.shape[1], mask.shape[0] * 32)  # the official packer requires in % 32 == 0
    params = {k: v for k, v in state.items() if not k.endswith((".mask", ".coeff"))}
    base_sha256, base_dtype = None, dtype_name(next(iter(params.values())).dtype) if params else "float32"
    if base_model is not None:
        _check_no_downcast(params, base_model.get_submodule(modules[0]).weight.dtype)
        base_state = base_model.state_dict()
        params = {k: v for k, v in params.items() if not _same_as_base(base_state.get(k), v)}
        base_sha256 = weights_fingerprint(base_model)
        base_dtype = dtype_name(base_model.get_submodule(modules[0]).weight.dtype)
    delta = BitDelta(masks=masks, scales=scales, shapes=shapes, params=params, base=base, base_revision=base_revision,
                     base_sha256=base_sha256, base_dtype=base_dtype)
    if base_model is not None:
        delta.check_base(base_model, verify=False)
    return delta


def convert(src: str | os.PathLike, out_dir: str | os.PathLike, *, base: str | None,
            base_model: nn.Module | str | os.PathLike | None = None, base_dtype: str | torch.dtype | None = None,
            base_revision: str | None = None) -> BitDelta:
    """Official ``diff.pt`` → zoo delta repo folder ``out_dir``. ``base_model``: the base (a model, or a zoo name /
    folder / HF id to load in ``base_dtype``, by default the diff's own) whose fingerprint the delta records."""
    state = read_official(src)
    if base_model is not None and not isinstance(base_model, nn.Module):
        from zoo.bitdelta._base import load_model

        base_model = load_model(base_model, revision=base_revision, dtype=base_dtype or carried_dtype(state))
    with releasing_pages():  # the file is mmap-ed: each tensor leaves memory once compared / written
        delta = from_official(state, base=base, base_model=base_model, base_revision=base_revision)
        delta.save(out_dir)
    return delta


def from_upstream(files: dict[str, Path], out_dir: Path, entry) -> None:
    """Catalog converter: an official Hub ``diff.pt`` → zoo delta repo naming ``entry.convert_args['base']``."""
    arch = entry.convert_args
    path = single_file(files, entry, "diff.pt")
    delta = convert(path, out_dir, base=arch["base"], base_revision=arch.get("base_revision"))
    expected = arch.get("num_modules")
    if expected is not None and len(delta.shapes) != expected:
        raise ValueError(f"{entry.name}: converted {len(delta.shapes)} compressed layers, expected {expected}")
