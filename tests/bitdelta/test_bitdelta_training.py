"""Scale distillation and training a loaded delta with lightning.Trainer on CPU."""

import json

import lightning as L
import pytest
import torch
from bitdelta_testdata import FIXTURES, logit_error, cpu_trainer

import zoo
from zoo.bitdelta.data import TextDataModule
from zoo.bitdelta.model import BitDeltaLinear
from zoo.bitdelta.module import ScaleDistillation

BASE, FINETUNE = str(FIXTURES / "base"), str(FIXTURES / "finetune")
BATCHES = str(FIXTURES / "distill_batches.safetensors")
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())["distill"]
# the scales are float32 means over whole weight matrices: summation order, so the last digits, vary by CPU
SCALE_RTOL = 1e-5


class _Losses(L.Callback):
    def __init__(self):
        self.losses, self.lrs = [], []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(outputs["loss"].item())

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])


def test_official_mode_reproduces_the_official_distillation(tmp_path, official, logits):
    """10 official-loop steps on the fixture batches: α, the full-precision params, the losses and the logits."""
    module = ScaleDistillation(base=BASE, finetune=FINETUNE, mode="official", out_dir=str(tmp_path / "calibrated"))
    record = _Losses()
    trainer = cpu_trainer(tmp_path, 10, callbacks=[record])
    trainer.fit(module, datamodule=TextDataModule(train=BATCHES, batch_size=4))
    assert trainer.global_step == 10
    assert record.lrs == pytest.approx(MANIFEST["lrs"], rel=1e-12)  # cosine, no warm-up, stepped per step
    assert record.losses == pytest.approx(MANIFEST["losses"], rel=1e-5)
    delta, reference = module.to_delta(), official["diff"]
    for name in delta.modules:
        assert torch.equal(delta.masks[name], reference[f"{name}.mask"])
        assert delta.scales[name].item() == pytest.approx(reference[f"{name}.coeff"].item(), rel=SCALE_RTOL, abs=1e-12)
    assert sorted(delta.params) == sorted(k for k in reference if not k.endswith((".mask", ".coeff")))
    for key, value in delta.params.items():
        torch.testing.assert_close(value, reference[key], rtol=0, atol=1e-6)
    # the distilled delta was written on train end and loads as the calibrated fine-tune
    assert logit_error(zoo.load(tmp_path / "calibrated"), logits, "logits_reconstructed_calibrated") <= 1e-5


def test_scales_mode_trains_only_the_scales(tmp_path, delta_a, logits, models):
    module = ScaleDistillation(base=BASE, finetune=FINETUNE, mode="scales", lr=2e-4)
    before = module.distillation_loss({"input_ids": logits["input_ids"]}).item()
    assert before == pytest.approx(0.00321, rel=2e-3)  # the README's logit MSE of the reconstructed model
    cpu_trainer(tmp_path, 10).fit(module, datamodule=TextDataModule(train=BATCHES, batch_size=4))
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert trainable == {f"model.{m}.scales" for m in delta_a.modules}
    delta = module.to_delta()
    assert sorted(delta.params) == sorted(delta_a.params)
    assert all(torch.equal(delta.params[k], delta_a.params[k]) for k in delta.params)  # untouched
    assert all(delta.scales[m].item() != delta_a.scales[m].item() for m in delta.modules)
    module.eval()
    assert module.distillation_loss({"input_ids": logits["input_ids"]}).item() < before


@pytest.mark.parametrize("merged", [False, True])
def test_a_loaded_delta_trains_its_scales_and_carried_tensors(tmp_path, delta_a, models, merged):
    delta_a.save(tmp_path / "delta")
    text = tmp_path / "train.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    model = zoo.load(tmp_path / "delta", merged=merged)
    q = "model.layers.0.self_attn.q_proj"
    base_q = models["base"].get_submodule(q).weight
    cpu_trainer(tmp_path, 2).fit(model, datamodule=TextDataModule(train=str(text), max_length=32, batch_size=4))
    trained = model.to_delta()
    assert all(torch.equal(trained.masks[n], delta_a.masks[n]) for n in delta_a.modules)
    assert all(trained.scales[n].item() != delta_a.scales[n].item() for n in delta_a.modules)
    assert not torch.equal(trained.params["model.norm.weight"], delta_a.params["model.norm.weight"])
    layer = model.model.get_submodule(q)
    signs = torch.where(models["finetune"].get_submodule(q).weight - base_q >= 0, 1.0, -1.0)
    if merged:  # the merged weight follows the trained scale
        torch.testing.assert_close(layer.weight, base_q + trained.scales[q] * signs, rtol=0, atol=1e-7)
    else:
        assert torch.equal(layer.weight, base_q)  # the base weight never trains
    model.save_pretrained(tmp_path / "trained")
    reloaded = zoo.load(tmp_path / "trained", merged=False).to_delta()
    assert all(torch.equal(reloaded.scales[n], trained.scales[n]) for n in trained.modules)
    assert all(torch.equal(reloaded.params[k], trained.params[k]) for k in trained.params)


@pytest.mark.slow  # spawning two ranks that import transformers takes 40-90 s on a shared 2-core machine
def test_ddp_spawn_trains_a_loaded_delta(tmp_path, delta_a):
    delta_a.save(tmp_path / "delta")
    model = zoo.load(tmp_path / "delta", merged=False)
    before = {n: m.scales.detach().clone() for n, m in model.named_modules() if isinstance(m, BitDeltaLinear)}
    trainer = cpu_trainer(tmp_path, 2, devices=2, strategy="ddp_spawn")
    trainer.fit(model, datamodule=TextDataModule(train=BATCHES, batch_size=2, max_length=128))
    assert "train_loss" in trainer.callback_metrics
    after = {n: m.scales.detach() for n, m in model.named_modules() if isinstance(m, BitDeltaLinear)}
    assert any(not torch.equal(before[n], after[n]) for n in before)  # the trained scales came back


def test_recipe_reproduces_the_official_delta(tmp_path, monkeypatch, official):
    from pathlib import Path

    from zoo.train import run_recipe

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "bitdelta" / "fixture-official.yaml"
    monkeypatch.chdir(recipe.parents[2])  # the recipe's paths are relative to the repo root
    out = tmp_path / "out"
    cli = run_recipe(recipe, [f"--model.init_args.out_dir={out}", f"--trainer.default_root_dir={tmp_path}",
                              "--trainer.enable_checkpointing=true"])
    assert cli.trainer.global_step == 10
    delta = zoo.load(out).to_delta()
    for name in delta.modules:
        assert delta.scales[name].item() == pytest.approx(official["diff"][f"{name}.coeff"].item(), rel=SCALE_RTOL, abs=1e-12)
    # the Lightning checkpoint (weights_only) publishes the same distilled delta
    (ckpt,) = tmp_path.rglob("*.ckpt")
    zoo.publish(str(ckpt), tmp_path / "published")
    published = zoo.load(tmp_path / "published").to_delta()
    assert all(torch.equal(published.scales[n], delta.scales[n]) for n in delta.modules)
    assert all(torch.equal(published.params[k], delta.params[k]) for k in delta.params)
