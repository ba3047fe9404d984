"""Training helpers shared by the methods: one EMA of weights, timm's weight-decay groups, the attached Trainer."""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn as nn

from zoo._lightning import L  # Lightning without the optional packages torchmetrics would import

__all__ = ["EMA", "EMAWeights", "EMA_CHECKPOINT_KEY", "weight_decay_groups", "attached_trainer"]

# where a checkpoint keeps what resuming needs beside the averaged weights: {"raw": {name: tensor}, "num_updates": n}
EMA_CHECKPOINT_KEY = "zoo_ema"


class EMA(nn.Module):
    """EMA of a module's parameters with LDM's warm-up: update n uses decay min(decay, (1 + n) / (10 + n)).
    State: ``shadow.*`` (the averaged copy, callable; RCG publishes it as ``ema.shadow.*``) and ``num_updates``."""

    def __init__(self, module: nn.Module, decay: float = 0.9999):
        super().__init__()
        self.max_decay = decay
        self.shadow = copy.deepcopy(module).requires_grad_(False)
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def update(self, module: nn.Module) -> None:
        self.num_updates += 1
        n = self.num_updates.float()
        decay = torch.clamp((1 + n) / (10 + n), max=self.max_decay)
        for shadow, param in zip(self.shadow.parameters(), module.parameters(), strict=True):
            shadow.sub_((1.0 - decay).to(shadow.dtype) * (shadow - param.detach()))

    @torch.no_grad()
    def swap(self, module: nn.Module) -> None:
        """Exchange the parameter values of ``module`` and the average."""
        for shadow, param in zip(self.shadow.parameters(), module.parameters(), strict=True):
            held = param.detach().clone()
            param.copy_(shadow)
            shadow.copy_(held)


class EMAWeights(L.Callback):
    """Train ``pl_module.<attribute>`` with an :class:`EMA` of its parameters (a module adds it in
    ``configure_callbacks``). Validation runs on the averaged weights; when training ends they become the weights.

    Checkpoints follow Lightning's ``WeightAveraging``: ``state_dict`` holds the averaged weights, so a checkpoint
    publishes and loads as the module after ``fit``, and the raw weights ride under :data:`EMA_CHECKPOINT_KEY` to
    resume. A ``save_weights_only`` checkpoint skips callbacks and holds the raw weights only.
    """

    def __init__(self, decay: float, attribute: str = "model"):
        self.decay, self.attribute = decay, attribute
        self.ema: EMA | None = None
        self.averaged = False  # the module holds the averaged weights and ema.shadow the raw ones
        self._resume: dict[str, Any] | None = None

    def _use_average(self, pl_module: L.LightningModule, averaged: bool) -> None:
        if self.ema is not None and self.averaged != averaged:
            self.ema.swap(getattr(pl_module, self.attribute))
            self.averaged = averaged

    def on_train_start(self, trainer, pl_module) -> None:
        target = getattr(pl_module, self.attribute)
        self.ema, self.averaged = EMA(target, self.decay), False  # built here: after setup, on the module's device
        if self._resume is not None:  # the checkpoint's weights, just loaded, are the average: restore the raw ones
            with torch.no_grad():
                for name, param in target.named_parameters():
                    param.copy_(self._resume["raw"][name])
            self.ema.num_updates.fill_(self._resume["num_updates"])
            self._resume = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.ema.update(getattr(pl_module, self.attribute))

    def on_validation_epoch_start(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit":
            self._use_average(pl_module, True)

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit":
            self._use_average(pl_module, False)

    def on_train_end(self, trainer, pl_module) -> None:
        self._use_average(pl_module, True)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        if self.ema is None:
            return
        target = getattr(pl_module, self.attribute)
        raw, averaged = (self.ema.shadow, target) if self.averaged else (target, self.ema.shadow)
        checkpoint[EMA_CHECKPOINT_KEY] = {"raw": {n: p.detach().clone() for n, p in raw.named_parameters()},
                                          "num_updates": int(self.ema.num_updates)}
        checkpoint["state_dict"].update({f"{self.attribute}.{n}": p.detach().clone()
                                         for n, p in averaged.named_parameters()})

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        self._resume = checkpoint.get(EMA_CHECKPOINT_KEY)


def weight_decay_groups(module: nn.Module, weight_decay: float, no_decay: tuple[str, ...] = ()) -> list[dict]:
    """timm's weight-decay groups of the trainable parameters: none on biases, 1-d parameters and names matching
    the ``no_decay`` patterns (fnmatch). The decayed group comes first, the order older checkpoints' optimizer
    states are in."""
    from timm.optim import param_groups_weight_decay  # timm imports torchvision: only when training

    groups = param_groups_weight_decay(module, weight_decay, no_weight_decay_list=no_decay)
    return sorted(groups, key=lambda group: group["weight_decay"] == 0)


def attached_trainer(module: L.LightningModule) -> L.Trainer | None:
    """The module's Trainer, or None when it runs without one (``LightningModule.trainer`` raises then)."""
    try:
        return module.trainer
    except RuntimeError:
        return None
