"""Learning-rate schedules shared by the methods' LightningModules."""

from __future__ import annotations

import math

import torch

__all__ = ["WarmupCosine", "warmup_cosine"]


class WarmupCosine:
    """Multiplier of the base learning rate: linear warm-up over ``warmup`` steps, then a half cosine from 1 down
    to ``min_ratio`` at step ``total`` (held there after). A class, not a closure, so checkpoints can pickle it."""

    def __init__(self, warmup: int, total: int, min_ratio: float = 0.0):
        if warmup < 0 or total < 1 or not 0.0 <= min_ratio <= 1.0:
            raise ValueError(f"need warmup >= 0, total >= 1 and 0 <= min_ratio <= 1; got {warmup}, {total}, {min_ratio}")
        self.warmup, self.total, self.min_ratio = warmup, total, min_ratio

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(optimizer: torch.optim.Optimizer, warmup: int, total: int, min_ratio: float = 0.0) -> dict:
    """``configure_optimizers``' return value: ``optimizer`` with a per-step :class:`WarmupCosine` schedule."""
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(warmup, total, min_ratio))
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
