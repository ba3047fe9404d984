"""Checks every method's DataModule passes: a seeded training order per epoch that a resumed run goes on with."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L

from zoo.lightning_compat import MidEpochResume
from zoo.training import ResumableBatchSampler


def _epoch_batches(data: L.LightningDataModule, epoch: int) -> list[list[int]]:
    loader = data.train_dataloader()
    assert isinstance(loader.batch_sampler, ResumableBatchSampler)
    loader.batch_sampler.sampler.set_epoch(epoch)  # as Lightning does at each epoch's start
    return list(loader.batch_sampler)


def assert_training_order_resumes(make_data: Callable[[], L.LightningDataModule]) -> None:
    """``make_data()`` gives a fresh DataModule with at least 3 training batches: each epoch has its own order, a
    second DataModule draws the same one, and after loading a mid-epoch position it starts where that left off."""
    data = make_data()
    assert isinstance(data, MidEpochResume)
    data.setup("fit")
    epoch0, epoch1 = _epoch_batches(data, 0), _epoch_batches(data, 1)
    assert len(epoch1) >= 3 and epoch1 != epoch0
    again = make_data()
    again.setup("fit")
    again.load_state_dict({"epoch": 1, "batches_done": 2})  # as a checkpoint saved after 2 batches of epoch 1
    assert _epoch_batches(again, 1) == epoch1[2:]
    assert _epoch_batches(again, 1) == epoch1  # the next pass is whole
