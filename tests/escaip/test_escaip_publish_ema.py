"""`zoo publish` of a Lightning checkpoint writes what `save_pretrained` after `fit` writes: EScAIP's EMA weights,
not the raw weights saved beside them (issue 28), also from checkpoints of the EMA before `EMAWeights` (issue 29).
And a dtype cast never rounds the float64 target scaling."""

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from safetensors.torch import load_file

import zoo
from zoo.escaip.data import EScAIPDataModule
from zoo.escaip.module import EScAIPModule
from zoo.lightning_compat import EMA_CHECKPOINT_KEY, EMAWeights

TINY = {"preset": "tiny", "max_num_elements": 30, "direct_forces": True}


@pytest.fixture(scope="module")
def fitted(emt_data, tmp_path_factory):
    """A tiny model after fit, with the last.ckpt Lightning saved at the final step (validation end)."""
    root = tmp_path_factory.mktemp("escaip_ema")
    torch.manual_seed(0)
    model = EScAIPModule(backbone=TINY, lr=2e-3, warmup_steps=2, ema_decay=0.9)
    checkpoints = ModelCheckpoint(dirpath=root / "checkpoints", monitor="val/loss", save_last=True)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[checkpoints], max_steps=4, num_sanity_val_steps=0, limit_val_batches=1,
                        val_check_interval=2)
    trainer.fit(model, datamodule=EScAIPDataModule(str(emt_data), val_fraction=0.25, max_atoms_per_batch=80))
    model.save_pretrained(root / "after_fit")
    return root, trainer


def _same_weights(a, b) -> None:
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


def test_publishing_a_training_checkpoint_writes_the_ema(fitted):
    root, _ = fitted
    last = root / "checkpoints" / "last.ckpt"
    ckpt = torch.load(last, map_location="cpu", weights_only=True)
    raw = ckpt[EMA_CHECKPOINT_KEY]["raw"]  # saved during training: the EMA as the weights, the raw ones beside
    assert any(not torch.equal(ckpt["state_dict"][f"model.{n}"], t) for n, t in raw.items())
    zoo.publish(str(last), root / "published")
    _same_weights(root / "published", root / "after_fit")


def test_a_checkpoint_written_after_fit_publishes_the_same(fitted):
    """`zoo train` rewrites a stale last.ckpt after fit: the same layout, so it publishes and resumes the same."""
    root, trainer = fitted
    trainer.save_checkpoint(root / "final.ckpt")
    final, last = (torch.load(root / p, map_location="cpu", weights_only=True) for p in ("final.ckpt", "checkpoints/last.ckpt"))
    for key in ("state_dict", EMA_CHECKPOINT_KEY):
        assert final[key].keys() == last[key].keys()
    zoo.publish(str(root / "final.ckpt"), root / "published_final")
    _same_weights(root / "published_final", root / "after_fit")


def _legacy(root):
    """The checkpoint EScAIP wrote before EMAWeights: the raw weights, the EMA beside them under `escaip_ema`."""
    ckpt = torch.load(root / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    raw = ckpt.pop(EMA_CHECKPOINT_KEY)["raw"]
    ckpt["escaip_ema"] = {n: ckpt["state_dict"][f"model.{n}"] for n in raw}
    ckpt["state_dict"].update({f"model.{n}": t for n, t in raw.items()})
    torch.save(ckpt, root / "legacy.ckpt")
    return root / "legacy.ckpt"


def test_a_legacy_checkpoint_publishes_its_ema(fitted):
    root, _ = fitted
    zoo.publish(str(_legacy(root)), root / "published_legacy")
    _same_weights(root / "published_legacy", root / "after_fit")


@pytest.mark.parametrize("legacy", [False, True])
def test_resuming_restores_the_raw_weights_and_the_update_count(fitted, emt_data, legacy):
    root, _ = fitted
    saved = torch.load(root / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)[EMA_CHECKPOINT_KEY]
    seen = []  # (weights, EMA updates) as the first resumed batch starts

    class FirstBatch(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            ema = next(c for c in trainer.callbacks if isinstance(c, EMAWeights))
            seen.append(({n: p.clone() for n, p in pl_module.model.named_parameters()}, ema.num_updates))

    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, callbacks=[FirstBatch()], max_steps=5, limit_val_batches=0)
    data = EScAIPDataModule(str(emt_data), val_fraction=0.25, max_atoms_per_batch=80)
    trainer.fit(EScAIPModule(backbone=TINY, lr=2e-3, warmup_steps=2, ema_decay=0.9), datamodule=data,
                ckpt_path=_legacy(root) if legacy else root / "checkpoints" / "last.ckpt")
    weights, updates = seen[0]
    assert updates == saved["num_updates"] == 4 and all(torch.equal(weights[n], t) for n, t in saved["raw"].items())


def test_dtype_casts_keep_the_float64_scaling_exact():
    """zoo.load(name, dtype="float32") must equal zoo.load(name): the old cast rounded the float64 references
    through float32, and a BitDelta of the model then failed its base fingerprint check."""
    plain, cast = zoo.load("escaip-tiny-emt"), zoo.load("escaip-tiny-emt", dtype="float32")
    for (name, a), b in zip(plain.state_dict().items(), cast.state_dict().values()):
        assert a.dtype == b.dtype and torch.equal(a, b), name
    scaling = {k: v.clone() for k, v in plain.scaling.state_dict().items()}
    plain.half().float()
    for name, value in plain.scaling.state_dict().items():
        assert value.dtype == scaling[name].dtype and torch.equal(value, scaling[name]), name
