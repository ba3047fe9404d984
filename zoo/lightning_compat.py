"""Where the zoo works with Lightning's internals or around its open issues: the EMA of weights, mid-epoch resume,
resuming after ``max_steps``, and the module's Trainer when it has none.

The mid-epoch resume reads ``trainer.fit_loop.epoch_loop.batch_progress`` and the ``max_steps`` fix edits the saved
``loops.fit_loop`` dicts, so both switch themselves off outside the Lightning releases tests/core/test_training.py
checks them on (:data:`WORKAROUNDS_TESTED`), leaving Lightning's own behaviour.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch
from torch.optim.swa_utils import AveragedModel

from zoo._lightning import L, PossibleUserWarning, WeightAveraging, installed_in, rank_zero_info
from zoo.training import ema_update_

__all__ = ["EMAWeights", "EMA_CHECKPOINT_KEY", "MidEpochResume", "resume_where_fit_stopped", "attached_trainer",
           "WORKAROUNDS_TESTED"]

#: The Lightning releases the workarounds of Lightning issues #20550 and #19617 below are tested on.
WORKAROUNDS_TESTED = {"lightning": ">=2.6,<2.7"}
_WORKAROUNDS_ON = installed_in(WORKAROUNDS_TESTED)

# where a checkpoint keeps what resuming needs beside the averaged weights: {"raw": {name: tensor}, "num_updates": n}
EMA_CHECKPOINT_KEY = "zoo_ema"


class EMAWeights(WeightAveraging):
    """Train ``pl_module.<attribute>`` with an EMA of its parameters, LDM's warm-up as :class:`~zoo.training.EMA` (a
    module adds it in ``configure_callbacks``); validation during ``fit`` and the weights after it are the average.

    Lightning's ``WeightAveraging``, except that only the attribute is averaged, from ``on_train_start`` (after the
    module's ``setup``, on its device), and that a checkpoint holds the averaged weights as ``state_dict`` (it
    publishes as the module after ``fit``) and the raw ones under :data:`EMA_CHECKPOINT_KEY`, to resume from. A
    ``save_weights_only`` checkpoint skips callbacks and holds the raw weights only.
    """

    def __init__(self, decay: float, attribute: str = "model"):
        super().__init__(use_buffers=False)
        self.decay, self.attribute = decay, attribute
        self.averaged = False  # the module holds the averaged weights and the AveragedModel the raw ones
        self._resume: dict[str, Any] | None = None

    @property
    def num_updates(self) -> int:
        return int(self._average_model.n_averaged) - 1  # see on_train_start

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Nothing yet: the average is built when training starts."""

    def on_train_start(self, trainer, pl_module) -> None:
        target = getattr(pl_module, self.attribute)
        self._average_model = AveragedModel(target, device=pl_module.device, use_buffers=False,
                                            multi_avg_fn=functools.partial(ema_update_, max_decay=self.decay))
        self.averaged, self._latest_update_step = False, trainer.global_step
        # AveragedModel's first update copies the weights: counting its copy as one makes update n weigh as EMA's
        self._average_model.n_averaged.fill_(1 + (self._resume["num_updates"] if self._resume else 0))
        if self._resume is not None:  # the checkpoint's weights, just loaded, are the average: restore the raw ones
            with torch.no_grad():
                for name, param in target.named_parameters():
                    param.copy_(self._resume["raw"][name])
            self._resume = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, getattr(pl_module, self.attribute), outputs, batch, batch_idx)

    def _use_average(self, pl_module: L.LightningModule, averaged: bool) -> None:
        if self._average_model is not None and self.averaged != averaged:
            self._swap_models(getattr(pl_module, self.attribute))
            self.averaged = averaged

    def on_validation_epoch_start(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit":
            self._use_average(pl_module, True)

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit":
            self._use_average(pl_module, False)

    def on_train_end(self, trainer, pl_module) -> None:
        self._use_average(pl_module, True)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        if self._average_model is None:
            return
        target, average = getattr(pl_module, self.attribute), self._average_model.module
        raw, averaged = (average, target) if self.averaged else (target, average)
        checkpoint[EMA_CHECKPOINT_KEY] = {"raw": {n: p.detach().clone() for n, p in raw.named_parameters()},
                                          "num_updates": self.num_updates}
        checkpoint["state_dict"].update({f"{self.attribute}.{n}": p.detach().clone()
                                         for n, p in averaged.named_parameters()})

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
        self._resume = checkpoint.get(EMA_CHECKPOINT_KEY)


class MidEpochResume:
    """A LightningDataModule mixin that saves the training position in every checkpoint and resumes there.

    Lightning restarts a plain DataLoader's epoch from its first batch, and never loads a stateful one's state when
    ``configure_optimizers`` asks for ``estimated_stepping_batches``
    (https://github.com/Lightning-AI/pytorch-lightning/issues/20550), so the datamodule's state carries the position:
    the training loader takes it with :meth:`take_resume_at` for its :class:`~zoo.training.ResumableBatchSampler`.
    """

    _resume_at: tuple[int, int] | None = None

    def state_dict(self) -> dict[str, Any]:
        trainer = getattr(self, "trainer", None)
        if not _WORKAROUNDS_ON or trainer is None or trainer.state.fn != "fit":
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
    """Make a checkpoint saved after ``fit`` ended resume as the run would have gone on (ZooModule's
    ``on_save_checkpoint`` calls this).

    Lightning counts an epoch that ``max_steps`` stopped as ended, so the epoch counter of a resumed run runs one
    ahead, and after an epoch's last batch it trains one stray batch first
    (https://github.com/Lightning-AI/pytorch-lightning/issues/19617). So a stopped epoch is recorded as unfinished,
    and an ended one as followed by no batch yet.
    """
    loop = checkpoint.get("loops", {}).get("fit_loop", {})
    epochs, batches = loop.get("epoch_progress"), loop.get("epoch_loop.batch_progress")
    if not _WORKAROUNDS_ON or not epochs or not batches or not batches["current"]["processed"]:
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


def attached_trainer(module: L.LightningModule) -> L.Trainer | None:
    """The module's Trainer, or None when it runs without one (``LightningModule.trainer`` raises then)."""
    try:
        return module.trainer
    except RuntimeError:
        return None
