"""Training on generated data: make-data (resumable), DataModule, references/normaliser fitting, EMA, DDP."""

import lightning as L
import numpy as np
import pytest
import torch
from training_checks import assert_training_order_resumes

import zoo
from zoo.escaip.data import AtomCountBatchSampler, EScAIPDataModule, read_structures
from zoo.escaip.make_data import make_data, plan_jobs
from zoo.escaip.module import EScAIPModule
from zoo.training import EpochSampler

TINY = {"preset": "tiny", "max_num_elements": 30}


def test_make_data_is_resumable_and_labelled(emt_data):
    segments = sorted(emt_data.glob("emt/*/*/seg_*.extxyz"))
    assert len(segments) == 4 and (emt_data / "manifest.json").exists()
    last = segments[-1]
    before = last.read_text()
    last.unlink()
    jobs = plan_jobs([], ["cu111_o", "ni111_n"], [600.0], seeds=1, frames=8, slab_frames=8, stride=2,
                     segment_frames=4)
    assert make_data(emt_data, jobs)["frames"] == 16  # only the missing segment is rerun ...
    assert last.read_text() == before  # ... and it continues the trajectory exactly (momenta + seeded thermostat)
    frames = read_structures(emt_data)
    assert len(frames) == 16
    from ase.calculators.emt import EMT
    from ase import Atoms

    f = frames[5]
    atoms = Atoms(numbers=f["atomic_numbers"], positions=f["pos"], cell=f["cell"], pbc=f["pbc"], calculator=EMT())
    assert atoms.get_potential_energy() == pytest.approx(f["energy"], abs=1e-6)
    np.testing.assert_allclose(atoms.get_forces(), f["forces"], atol=1e-6)
    assert f["has_stress"]


def test_exclude_holds_whole_trajectories_out(emt_data):
    everything = read_structures(emt_data)
    kept = read_structures(emt_data, exclude=["*/ni111_n/*"])
    assert len(kept) == 8 and len(everything) == 16
    assert all(28 not in set(f["atomic_numbers"]) for f in kept)  # no nickel frame survives
    assert {tuple(f["atomic_numbers"]) for f in kept} == {tuple(everything[0]["atomic_numbers"])}
    dm = EScAIPDataModule(str(emt_data), exclude=["*/cu111_o/*"], val_fraction=0.25)
    dm.setup("fit")
    assert len(dm.train_set) + len(dm.val_set) == 8
    assert all(28 in set(s["atomic_numbers"]) for s in dm.train_set.samples + dm.val_set.samples)
    with pytest.raises(ValueError, match="after excluding"):
        read_structures(emt_data, exclude=["*.extxyz"])


def test_atom_count_batches_cover_everything_and_balance_ranks():
    counts = [5, 9, 3, 12, 7, 7, 2, 30, 4]

    class Shard:  # what Lightning injects under DDP
        def __init__(self, rank):
            self.num_replicas, self.rank = 2, rank

    single = AtomCountBatchSampler(None, counts, max_atoms=16, seed=3)
    batches = list(single)
    assert sorted(i for b in batches for i in b) == list(range(len(counts)))
    assert all(sum(counts[i] for i in b) <= 16 or len(b) == 1 for b in batches)
    ranks = [list(AtomCountBatchSampler(Shard(r), counts, max_atoms=16, seed=3)) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == len(AtomCountBatchSampler(Shard(0), counts, 16, seed=3))
    assert {i for r in ranks for b in r for i in b} == set(range(len(counts)))
    single.set_epoch(1)
    assert list(single) != batches  # reshuffled per epoch


def test_every_epoch_has_as_many_batches_as_lightning_was_told_and_validates():
    """A new order packs into a few batches more or fewer than epoch 0's. Lightning reads len() once and validates
    when an epoch reaches that many batches: an epoch one batch short trained without its validation."""
    generator = torch.Generator().manual_seed(0)
    counts = torch.randint(1, 30, (300,), generator=generator).tolist()
    sampler = AtomCountBatchSampler(EpochSampler(counts), counts, max_atoms=64, seed=1)
    packed = []
    for epoch in range(12):
        sampler.sampler.set_epoch(epoch)
        packed.append(len(sampler._pack(epoch)))
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(counts)))
        assert all(sum(counts[i] for i in b) <= 64 for b in batches)
    assert min(packed) < len(sampler) < max(packed)  # both repairs ran: splitting and spreading

    class Validated(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.weight, self.epochs = torch.nn.Parameter(torch.zeros(1)), []

        def training_step(self, batch, batch_idx):
            return (self.weight - batch.float().mean()).pow(2).sum()

        def validation_step(self, batch, batch_idx):
            pass

        def on_validation_epoch_end(self):
            self.epochs.append(self.current_epoch)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1e-3)

    loader = lambda: torch.utils.data.DataLoader(counts, batch_sampler=AtomCountBatchSampler(
        EpochSampler(counts), counts, max_atoms=64, seed=1))
    model = Validated()
    trainer(max_epochs=12, num_sanity_val_steps=0).fit(model, loader(), loader())
    assert model.epochs == list(range(12))


def trainer(**kw):
    return L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False, **kw)


def test_fitting_references_without_a_datamodule_to_ask_is_one_error(emt_data):
    model = EScAIPModule(backbone=TINY, fit_references=True)
    data = EScAIPDataModule(str(emt_data), max_atoms_per_batch=80)
    data.setup("fit")
    with pytest.raises(ValueError, match="fit_references=True needs a datamodule .*EScAIPDataModule.target_scaling"):
        trainer(max_steps=1).fit(model, train_dataloaders=data.train_dataloader())  # a loader, no datamodule
    assert not bool(model.scaling.fitted)


@pytest.mark.parametrize("forces", ["direct", "gradient"])
def test_tiny_model_trains_and_fine_tunes_after_loading(emt_data, tmp_path, forces):
    torch.manual_seed(0)
    backbone = dict(TINY, direct_forces=forces == "direct", regress_stress=forces == "gradient")
    model = EScAIPModule(backbone=backbone, lr=2e-3, warmup_steps=2, ema_decay=0.9)
    data = EScAIPDataModule(str(emt_data), val_fraction=0.25, max_atoms_per_batch=80)
    fit = trainer(max_steps=4, num_sanity_val_steps=0, limit_val_batches=1, val_check_interval=2)
    fit.fit(model, datamodule=data)
    # element references and normaliser were fitted on the training frames and are part of the weights
    s = model.scaling
    assert bool(s.fitted) and set(torch.nonzero(s.supported_elements).flatten().tolist()) == {7, 8, 28, 29}
    refs = s.element_references.numpy()
    counts = np.stack([np.bincount(x["atomic_numbers"], minlength=30) for x in data.train_set.samples])
    residual = np.array([x["energy"] for x in data.train_set.samples]) - counts @ refs
    np.testing.assert_allclose(counts.T @ residual, 0, atol=1e-6)  # least-squares references
    assert refs[1] == 0 and s.energy_mean.item() == pytest.approx(residual.mean())
    forces_all = np.concatenate([x["forces"].ravel() for x in data.train_set.samples])
    assert s.forces_rmsd.item() == pytest.approx(np.sqrt(np.mean(forces_all**2)))
    metrics = fit.callback_metrics
    for key in ("train/loss", "val/energy_mae_per_atom", "val/force_mae", "val/force_cos"):
        assert torch.isfinite(metrics[key]), key
    if forces == "gradient":
        assert torch.isfinite(metrics["train/loss_stress"])
    # the trained weights are the EMA; saved, loaded with zoo.load, they predict the same
    model.save_pretrained(tmp_path)
    loaded = zoo.load(tmp_path)
    batch = next(iter(data.val_dataloader()))
    a, b = model.eval().predict(batch), loaded.predict(batch)
    assert torch.allclose(a["energy"], b["energy"]) and torch.allclose(a["forces"], b["forces"])
    # the last validation (one batch, these weights): force_cos is the mean cosine over its atoms
    cos = torch.nn.functional.cosine_similarity(a["forces"], batch["forces"].to(a["forces"].dtype), dim=-1)
    assert metrics["val/force_cos"].item() == pytest.approx(cos.mean().item(), abs=1e-5)
    # fine-tune as is: Trainer.fit on the loaded module keeps the saved references
    refs = loaded.scaling.element_references.clone()
    before = {k: v.clone() for k, v in loaded.state_dict().items()}
    trainer(max_steps=2, num_sanity_val_steps=0, limit_val_batches=0).fit(loaded, datamodule=data)
    assert torch.equal(loaded.scaling.element_references, refs)
    assert any(not torch.equal(before[k], v) for k, v in loaded.state_dict().items() if k.startswith("model."))


def test_a_run_resumed_mid_epoch_trains_on_the_batches_it_had_left(emt_data, tmp_path):
    """Killed in the middle of its second epoch and resumed from its last checkpoint, a run trains on the batches
    it had left and ends with the weights of a run that never stopped. (Lightning alone restarts the epoch from
    its first batch, and never called the batch sampler's `set_epoch`: every epoch had the same order.)"""
    from lightning.pytorch.callbacks import ModelCheckpoint

    per_epoch, kill_at, steps = 12, 15, 20

    class Killed(Exception):
        pass

    class Record(L.Callback):
        def __init__(self, batches: list, kill: bool):
            self.batches, self.kill = batches, kill

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if self.kill and trainer.global_step == kill_at:
                raise Killed  # as a killed job: nothing more is saved
            self.batches.append(round(batch["pos"].sum().item(), 6))

    def run(batches: list, kill=False, ckpt_path=None):
        torch.manual_seed(0)
        last = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, every_n_train_steps=5)
        model = EScAIPModule(backbone=TINY, lr=2e-3, warmup_steps=2, ema_decay=0.9)
        data = EScAIPDataModule(str(emt_data), val_fraction=0.25, max_atoms_per_batch=40)  # one frame a batch
        fit = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[Record(batches, kill), last], max_steps=steps, limit_val_batches=0)
        fit.fit(model, datamodule=data, ckpt_path=ckpt_path)
        return model.state_dict()

    straight, first, rest = [], [], []
    weights = run(straight)
    assert len(set(straight[:per_epoch])) == per_epoch and straight[per_epoch:] != straight[:steps - per_epoch]
    (tmp_path / "ckpt" / "last.ckpt").unlink()
    with pytest.raises(Killed):
        run(first, kill=True)
    resumed_weights = run(rest, ckpt_path=tmp_path / "ckpt" / "last.ckpt")
    assert first + rest == straight
    for name, value in weights.items():
        torch.testing.assert_close(resumed_weights[name], value, msg=name)


def test_training_with_ddp_spawn_on_two_processes(emt_data, tmp_path):
    model = EScAIPModule(backbone=TINY, warmup_steps=1)
    data = EScAIPDataModule(str(emt_data), val_fraction=0.25, max_atoms_per_batch=80)
    before = {k: v.clone() for k, v in model.model.state_dict().items()}
    fit = trainer(max_steps=2, strategy="ddp_spawn", devices=2, num_sanity_val_steps=0, limit_val_batches=0)
    fit.fit(model, datamodule=data)
    # ddp_spawn copies the trained weights (and the fitted scaling buffers) back to the parent process
    assert torch.isfinite(fit.callback_metrics["train/loss"])
    assert bool(model.scaling.fitted) and model.scaling.forces_rmsd.item() != 1.0
    assert any(not torch.equal(before[k], v) for k, v in model.model.state_dict().items())


def test_training_order_is_seeded_per_epoch_and_resumes_mid_epoch(emt_data):
    assert_training_order_resumes(lambda: EScAIPDataModule(str(emt_data), val_fraction=0.25, max_atoms_per_batch=40))
