"""Convert official EScAIP weights into zoo repos (``config.json`` + ``model.safetensors``), from either
  * a fairchem inference checkpoint (a pickle of ``MLIPInferenceCheckpoint``), read with ``weights_only=True`` and a
    local stand-in for that one class, so fairchem is never imported; or
  * a state dict (``.safetensors`` or ``.pt``) with fairchem key names plus a JSON of ``backbone_kwargs`` and ``heads``
    (as the reference fixtures' ``*_config.json``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zoo.io import releasing_pages
from zoo.convert import map_keys, safe_torch_load
from zoo.escaip.model import EScAIPConfig
from zoo.escaip.module import EScAIPModule, TargetScaling

__all__ = ["InferenceCheckpoint", "load_inference_checkpoint", "convert_checkpoint", "convert_state_dict"]

CHECKPOINT_CLASS = "fairchem.core.units.mlip_unit.api.inference.MLIPInferenceCheckpoint"


@dataclass
class InferenceCheckpoint:
    """Stand-in for fairchem's ``MLIPInferenceCheckpoint`` (the same four fields)."""

    model_config: dict = field(default_factory=dict)
    model_state_dict: dict = field(default_factory=dict)
    ema_state_dict: dict = field(default_factory=dict)
    tasks_config: list = field(default_factory=list)


def load_inference_checkpoint(path: str | os.PathLike) -> InferenceCheckpoint:
    ckpt = safe_torch_load(path, [(InferenceCheckpoint, CHECKPOINT_CLASS)], what="a fairchem inference checkpoint")
    if not isinstance(ckpt, InferenceCheckpoint):
        raise ValueError(f"{path} holds a {type(ckpt).__name__}, not a fairchem MLIPInferenceCheckpoint")
    return ckpt


# fairchem key names -> ours: an AveragedModel's state (the EMA) wraps them in ``module.`` and counts its updates
FAIRCHEM_RULES = [("n_averaged", None), ("module.", "model."), ("", "model.")]


def _task_scaling(tasks: list[dict[str, Any]], dataset: str | None, max_num_elements: int) -> dict[str, Any]:
    """Normaliser constants and element references of the energy/forces/stress tasks of one dataset."""
    if dataset is None:
        names = sorted({d for t in tasks for d in t.get("datasets", [])})
        if len(names) > 1:
            raise ValueError(f"the checkpoint has tasks for several datasets {names}; choose one with --dataset")
        dataset = names[0] if names else None
    chosen = {}
    for task in tasks:
        if dataset is not None and dataset not in task.get("datasets", [dataset]):
            continue
        prop = task.get("property")
        if prop in chosen:
            raise ValueError(f"two {prop} tasks for dataset {dataset!r}; the checkpoint is ambiguous")
        chosen[prop] = task
    out: dict[str, Any] = {}
    for prop, task in chosen.items():
        norm = task.get("normalizer") or {}
        mean, rmsd = float(norm.get("mean", 0.0)), float(norm.get("rmsd", 1.0))
        if prop == "energy":
            out["energy_mean"], out["energy_rmsd"] = mean, rmsd
            if refs_cfg := task.get("element_references"):
                refs = refs_cfg.get("element_references", refs_cfg)
                refs = refs.get("_args_", [refs])[0] if isinstance(refs, dict) else refs
                refs = np.asarray(refs.double() if isinstance(refs, torch.Tensor) else refs, dtype=np.float64).ravel()
                if np.any(refs[max_num_elements:]):
                    raise ValueError(f"element references cover Z up to {len(refs) - 1}, beyond the model's elements")
                out["element_references"] = np.zeros(max_num_elements)
                out["element_references"][:len(refs)] = refs[:max_num_elements]
        elif prop in ("forces", "stress"):
            if mean != 0.0:
                raise ValueError(f"a {prop} normaliser with a non-zero mean ({mean}) is not supported")
            out[f"{prop}_rmsd"] = rmsd
    return out


def _build(backbone: dict[str, Any], heads: dict[str, Any], state: dict[str, torch.Tensor],
           scaling: dict[str, Any]) -> EScAIPModule:
    backbone = {k: v for k, v in backbone.items() if k != "model"}
    weights = {k: v.float() if v.is_floating_point() else v for k, v in map_keys(state, FAIRCHEM_RULES).items()}
    # the scaling buffers are ours (float64): the defaults, then the checkpoint's tasks (none: fitted as they are)
    targets = TargetScaling(EScAIPConfig.from_dict(backbone).max_num_elements)
    targets.set_(**scaling)
    weights.update({f"scaling.{name}": buf for name, buf in targets.state_dict().items()})
    hparams = dict(backbone=backbone, heads={name: dict(spec) for name, spec in heads.items()})
    try:
        return EScAIPModule.from_state_dict(hparams, weights)
    except RuntimeError as err:
        raise ValueError(f"the state dict does not match its config: {err}") from None


def convert_checkpoint(src: str | os.PathLike, out_dir: str | os.PathLike, *, use_ema: bool = False,
                       dataset: str | None = None) -> EScAIPModule:
    """fairchem inference checkpoint -> zoo repo folder; normaliser and element references applied."""
    ckpt = load_inference_checkpoint(src)
    config = ckpt.model_config
    if "backbone" not in config or "heads" not in config:
        raise ValueError(f"{src}: model_config lacks 'backbone' or 'heads'")
    backbone = dict(config["backbone"])
    model_name = str(backbone.get("model", ""))
    if "escaip" not in model_name.lower():
        raise ValueError(f"{src} holds a {model_name or 'non-EScAIP'} backbone, not EScAIP")
    state = ckpt.ema_state_dict if use_ema else ckpt.model_state_dict
    if not state:
        raise ValueError(f"{src} has no {'EMA ' if use_ema else ''}state dict")
    max_el = int(backbone.get("max_num_elements", 110))
    module = _build(backbone, config["heads"], state, _task_scaling(ckpt.tasks_config, dataset, max_el))
    with releasing_pages():
        module.save_pretrained(out_dir)
    return module


def convert_state_dict(src: str | os.PathLike, config_path: str | os.PathLike,
                       out_dir: str | os.PathLike) -> EScAIPModule:
    """State dict with fairchem key names + JSON {backbone_kwargs, heads} -> zoo repo folder."""
    config = json.loads(Path(config_path).read_text())
    if "backbone_kwargs" not in config or "heads" not in config:
        raise ValueError(f"{config_path} must hold 'backbone_kwargs' and 'heads' (as fairchem's *_config.json)")
    src = Path(src)
    if src.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(src))
    else:
        state = safe_torch_load(src, what="a state dict")
        state = state.get("state_dict", state) if isinstance(state, dict) else state
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise ValueError(f"{src} is not a flat state dict of tensors")
    module = _build(config["backbone_kwargs"], config["heads"], state, {})
    module.save_pretrained(out_dir)
    return module
