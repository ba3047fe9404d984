"""Training helpers shared by the methods: one EMA of weights, timm's weight-decay groups, and a seeded data order
that a run resumed mid-epoch goes on with. (What works with Lightning's internals is in :mod:`zoo.lightning_compat`.)"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence, Sized
from typing import Any

import torch
import torch.nn as nn
from torch import Tensor
from torch.utils.data import BatchSampler, DataLoader, Dataset, Sampler, SequentialSampler

__all__ = ["EMA", "ema_update_", "weight_decay_groups", "EpochSampler", "ResumableBatchSampler", "resumable_loader"]


@torch.no_grad()
def ema_update_(averages: Sequence[Tensor], values: Sequence[Tensor], n: Tensor, max_decay: float) -> None:
    """Update ``n`` (counted from 1) of an EMA with LDM's warm-up: decay min(max_decay, (1 + n) / (10 + n)).
    (The signature of ``AveragedModel``'s ``multi_avg_fn``.)"""
    n = n.float()
    weight = 1.0 - torch.clamp((1 + n) / (10 + n), max=max_decay)
    for average, value in zip(averages, values, strict=True):
        average.sub_(weight.to(average.dtype) * (average - value.detach()))


class EMA(nn.Module):
    """EMA of a module's parameters (:func:`ema_update_`).
    State: ``shadow.*`` (the averaged copy, callable; RCG publishes it as ``ema.shadow.*``) and ``num_updates``."""

    def __init__(self, module: nn.Module, decay: float = 0.9999):
        super().__init__()
        self.max_decay = decay
        self.shadow = copy.deepcopy(module).requires_grad_(False)
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))

    def update(self, module: nn.Module) -> None:
        self.num_updates += 1
        ema_update_(list(self.shadow.parameters()), list(module.parameters()), self.num_updates, self.max_decay)


def weight_decay_groups(module: nn.Module, weight_decay: float, no_decay: tuple[str, ...] = ()) -> list[dict]:
    """timm's weight-decay groups of the trainable parameters: none on biases, 1-d parameters and names matching
    the ``no_decay`` patterns (fnmatch). The decayed group comes first, the order older checkpoints' optimizer
    states are in."""
    from timm.optim import param_groups_weight_decay  # timm imports torchvision: only when training

    groups = param_groups_weight_decay(module, weight_decay, no_weight_decay_list=no_decay)
    return sorted(groups, key=lambda group: group["weight_decay"] == 0)


# ----------------------------------------------------------------------------- data order and mid-epoch resume
class EpochSampler(SequentialSampler):
    """A dataset's indices in order, and the epoch Lightning sets here each epoch: a :class:`ResumableBatchSampler`
    orders its batches by it. (Under DDP Lightning puts a DistributedSampler in its place, which has the epoch too.)"""

    def __init__(self, data_source: Sized):
        super().__init__(data_source)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


class ResumableBatchSampler(BatchSampler):
    """Batches of ``batch_size`` of ``size`` indices, shuffled by ``seed + epoch`` (or in order), so every epoch has
    its own order and a resumed run draws the same one.

    The inner ``sampler`` (an :class:`EpochSampler`) carries the epoch, which Lightning sets there and never on a
    batch sampler. Under DDP it is a DistributedSampler whose ``num_replicas`` and ``rank`` deal out whole batches,
    padded to a multiple of the world size. ``resume_at=(epoch, n)`` makes the next pass go on with that epoch's
    order after its first ``n`` batches (an argument: Lightning rebuilds the batch sampler from them under DDP).
    Subclasses that batch otherwise override :meth:`epoch_batches` and :attr:`num_batches`.
    """

    def __init__(self, sampler: Sampler | None, size: int, batch_size: int = 1, drop_last: bool = False,
                 shuffle: bool = True, seed: int = 0, resume_at: tuple[int, int] | None = None):
        super().__init__(sampler, batch_size=batch_size, drop_last=drop_last)
        self.size, self.shuffle, self.seed, self.resume_at = size, shuffle, seed, resume_at
        self._epoch = 0
        self.pass_epoch: int | None = None  # the epoch whose order the current pass follows

    @property
    def epoch(self) -> int:
        return getattr(self.sampler, "epoch", self._epoch)

    def set_epoch(self, epoch: int) -> None:
        self._epoch = epoch
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def order(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.size))
        return torch.randperm(self.size, generator=torch.Generator().manual_seed(self.seed + epoch)).tolist()

    @property
    def num_batches(self) -> int:
        """Batches in every epoch, over all ranks."""
        return self.size // self.batch_size if self.drop_last else -(-self.size // self.batch_size)

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """The epoch's batches, before DDP deals them out."""
        order = self.order(epoch)
        return [order[i:i + self.batch_size] for i in range(0, self.num_batches * self.batch_size, self.batch_size)]

    def _rank_batches(self, epoch: int) -> list[list[int]]:
        batches = self.epoch_batches(epoch)
        world, rank = getattr(self.sampler, "num_replicas", 1), getattr(self.sampler, "rank", 0)
        if world > 1:
            if self.drop_last:
                batches = batches[: len(batches) - len(batches) % world]
            else:
                batches += batches[: (-len(batches)) % world]
            batches = batches[rank::world]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        # a generator: the body runs at the first batch, after Lightning has set the epoch and loaded a checkpoint
        if self.resume_at is None:
            epoch, done = self.epoch, 0
        else:
            # whatever epoch Lightning resumes as (see zoo.lightning_compat.resume_where_fit_stopped), this pass
            # finishes the interrupted epoch in its own order
            (epoch, done), self.resume_at = self.resume_at, None
        self.pass_epoch = epoch
        yield from self._rank_batches(epoch)[done:]

    def __len__(self) -> int:
        world = getattr(self.sampler, "num_replicas", 1)
        return self.num_batches // world if self.drop_last else -(-self.num_batches // world)


def resumable_loader(dataset: Dataset, batch_size: int, *, shuffle: bool, seed: int = 0, drop_last: bool = False,
                     resume_at: tuple[int, int] | None = None, **loader_kwargs: Any) -> DataLoader:
    """A DataLoader whose batches come from a :class:`ResumableBatchSampler` over ``dataset``."""
    batches = ResumableBatchSampler(EpochSampler(dataset), len(dataset), batch_size, drop_last, shuffle=shuffle,
                                    seed=seed, resume_at=resume_at)
    return DataLoader(dataset, batch_sampler=batches, **loader_kwargs)
