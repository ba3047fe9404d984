"""Training helpers shared by the methods: one EMA of weights, timm's weight-decay groups, the attached Trainer,
and a seeded data order that a run resumed mid-epoch goes on with."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator, Sized
from typing import Any

import torch
import torch.nn as nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, Sampler, SequentialSampler

from zoo._lightning import L  # Lightning without the optional packages torchmetrics would import

__all__ = ["EMA", "EMAWeights", "EMA_CHECKPOINT_KEY", "weight_decay_groups", "attached_trainer", "EpochSampler",
           "ResumableBatchSampler", "MidEpochResume", "resumable_loader", "resume_where_fit_stopped"]

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

    The order is the batch sampler's own: the inner ``sampler`` (an :class:`EpochSampler`) carries the epoch,
    which Lightning sets there and never on a batch sampler. Under DDP Lightning puts a DistributedSampler there;
    its ``num_replicas`` and ``rank`` deal out whole batches of one global batching, padded to a multiple of the
    world size, so every rank sees as many.

    ``resume_at=(epoch, n)`` makes the next pass go on with that epoch's order after its first ``n`` batches: a run
    resumed from a mid-epoch checkpoint trains on the batches it had not trained on. (An argument: Lightning
    rebuilds the batch sampler from its arguments under DDP.)

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
            # whatever epoch Lightning resumes as (see `resume_where_fit_stopped`), this pass finishes the
            # interrupted epoch in its own order
            (epoch, done), self.resume_at = self.resume_at, None
        self.pass_epoch = epoch
        yield from self._rank_batches(epoch)[done:]

    def __len__(self) -> int:
        world = getattr(self.sampler, "num_replicas", 1)
        return self.num_batches // world if self.drop_last else -(-self.num_batches // world)


class MidEpochResume:
    """A LightningDataModule mixin that saves the training position in every checkpoint and resumes there.

    Lightning restarts a plain DataLoader's epoch from its first batch, and never loads the state of a stateful
    one when ``configure_optimizers`` asks for ``estimated_stepping_batches`` (Lightning issue #20550). The
    datamodule's own state is saved and loaded in every checkpoint: it carries the position instead. The
    training loader takes it once with :meth:`take_resume_at` and passes it to its :class:`ResumableBatchSampler`.
    """

    _resume_at: tuple[int, int] | None = None

    def state_dict(self) -> dict[str, Any]:
        trainer = getattr(self, "trainer", None)
        if trainer is None or trainer.state.fn != "fit":
            return {}
        # the epoch whose order the batches come from, as the pass knows it: Lightning's `current_epoch` runs one
        # ahead after max_steps stopped an epoch (unless the module saves through `resume_where_fit_stopped`)
        epoch = getattr(getattr(trainer.train_dataloader, "batch_sampler", None), "pass_epoch", None)
        if epoch is None:
            return {}
        batches = trainer.fit_loop.epoch_loop.batch_progress
        return {"epoch": epoch, "batches_done": batches.current.processed, "epoch_done": batches.is_last_batch}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not state_dict.get("batches_done") or state_dict.get("epoch_done"):
            return  # saved at an epoch's start or end: the next epoch starts whole
        from lightning.pytorch.utilities import rank_zero_info
        from lightning.pytorch.utilities.warnings import PossibleUserWarning

        self._resume_at = (int(state_dict["epoch"]), int(state_dict["batches_done"]))
        rank_zero_info(f"Resuming epoch {self._resume_at[0]} after its first {self._resume_at[1]} batches")
        # handled here, so Lightning's warning that the dataloader cannot resume mid-epoch does not apply
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch",
                                category=PossibleUserWarning)

    def take_resume_at(self) -> tuple[int, int] | None:
        """The position a loaded checkpoint left, once: the next training loader starts there."""
        resume_at, self._resume_at = self._resume_at, None
        return resume_at


def resume_where_fit_stopped(checkpoint: dict[str, Any]) -> None:
    """Make a checkpoint saved after ``fit`` ended resume as the run would have gone on.

    Lightning counts an epoch that ``max_steps`` stopped as ended, yet a resumed run goes on from its batch n in the
    next epoch: the epoch counter runs one ahead for the rest of the run. After a run that ended with an epoch's
    last batch it trains one stray batch first (Lightning issue #19617). So a stopped epoch is recorded as
    unfinished, and an ended one as followed by no batch yet. (ZooModule's ``on_save_checkpoint`` calls this.)
    """
    loop = checkpoint.get("loops", {}).get("fit_loop", {})
    epochs, batches = loop.get("epoch_progress"), loop.get("epoch_loop.batch_progress")
    if not epochs or not batches or not batches["current"]["processed"]:
        return
    if epochs["current"]["completed"] != epochs["current"]["started"]:
        return  # saved inside an epoch, or at its end before Lightning closed it: it resumes right
    if batches["is_last_batch"]:
        batches["current"] = dict.fromkeys(batches["current"], 0)
        batches["is_last_batch"] = False
    else:
        for progress in (epochs["total"], epochs["current"]):
            progress["processed"] -= 1
            progress["completed"] -= 1
        checkpoint["epoch"] -= 1


def resumable_loader(dataset: Dataset, batch_size: int, *, shuffle: bool, seed: int = 0, drop_last: bool = False,
                     resume_at: tuple[int, int] | None = None, **loader_kwargs: Any) -> DataLoader:
    """A DataLoader whose batches come from a :class:`ResumableBatchSampler` over ``dataset``."""
    batches = ResumableBatchSampler(EpochSampler(dataset), len(dataset), batch_size, drop_last, shuffle=shuffle,
                                    seed=seed, resume_at=resume_at)
    return DataLoader(dataset, batch_sampler=batches, **loader_kwargs)
