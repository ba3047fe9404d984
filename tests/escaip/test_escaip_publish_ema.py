"""`zoo publish` of a Lightning checkpoint writes what `save_pretrained` after `fit` writes: EScAIP's EMA weights,
not the raw weights saved beside them (issue 28). And a dtype cast never rounds the float64 target scaling."""

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from safetensors.torch import load_file

import zoo
from zoo.escaip.data import EScAIPDataModule
from zoo.escaip.module import EScAIPModule

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
    assert "escaip_ema" in ckpt  # saved during training: the raw weights, with the EMA beside them
    assert any(not torch.equal(ckpt["state_dict"][f"model.{n}"], t) for n, t in ckpt["escaip_ema"].items())
    zoo.publish(str(last), root / "published")
    _same_weights(root / "published", root / "after_fit")


def test_a_checkpoint_written_after_fit_publishes_the_same(fitted):
    """`zoo train` rewrites a stale last.ckpt after fit: its weights already are the EMA, with none beside them."""
    root, trainer = fitted
    trainer.save_checkpoint(root / "final.ckpt")
    assert "escaip_ema" not in torch.load(root / "final.ckpt", map_location="cpu", weights_only=True)
    zoo.publish(str(root / "final.ckpt"), root / "published_final")
    _same_weights(root / "published_final", root / "after_fit")


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
