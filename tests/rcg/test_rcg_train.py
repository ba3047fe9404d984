"""Every RCG stage loaded with zoo.load (or built from a recipe-like config) trains a few steps on CPU."""

import pickle

import lightning as L
import pytest
import torch
from training_checks import assert_training_order_resumes

import zoo
from zoo.rcg.data import ImageDataModule
from zoo.rcg.module import MocoV3Module, RDMModule, mage_targets

TINY_ENCODER = dict(img_size=32, patch_size=8, embed_dim=16, depth=1, num_heads=2, proj_hidden_dim=32, rep_dim=16)


def fit(model, data, steps: int = 2, precision="32-true"):
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, precision=precision, logger=False,
                        enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0)
    trainer.fit(model, datamodule=data)
    return trainer


def snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def changed(before, module, prefix):
    after = module.state_dict()
    return [k for k in before if k.startswith(prefix) and before[k].is_floating_point() and not torch.equal(before[k], after[k])]


def data_for(root, stage, batch_size=4):
    return ImageDataModule(str(root), stage=stage, image_size=32, batch_size=batch_size, num_workers=0)


def test_rdm_stage_trains_with_ema_and_frozen_encoder(converted, image_folder):
    model = zoo.load(converted["rdm"])
    before = snapshot(model)
    updates = int(model.ema.num_updates)
    fit(model, data_for(image_folder, "rdm"))
    assert changed(before, model, "rdm.denoiser.")
    assert not changed(before, model, "encoder.")  # frozen, BatchNorm statistics included
    assert int(model.ema.num_updates) == updates + 2
    assert changed(before, model, "ema.shadow.")


def test_mage_stage_trains_under_bf16_autocast_with_frozen_encoder_and_tokenizer(converted, image_folder):
    """The frozen tokenizer and encoder give their targets in full precision, whatever the autocast."""
    model = zoo.load(converted["mage"])
    images = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    codes, rep = mage_targets(model.mage, model.vqgan, model.encoder, images)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not torch.equal(model.vqgan.encode(images), codes)  # what bf16 targets would be
        bf16_codes, bf16_rep = mage_targets(model.mage, model.vqgan, model.encoder, images)
    assert torch.equal(bf16_codes, codes) and torch.equal(bf16_rep, rep)
    before = snapshot(model)
    fit(model, data_for(image_folder, "mage"), precision="bf16-mixed")  # the small recipes' setting
    assert changed(before, model, "mage.")
    assert not changed(before, model, "encoder.") and not changed(before, model, "vqgan.")
    assert all(v.dtype == torch.float32 for v in model.mage.state_dict().values() if v.is_floating_point())


def test_vqgan_stage_trains(converted, image_folder):
    model = zoo.load(converted["vqgan"])
    before = snapshot(model)
    fit(model, data_for(image_folder, "vqgan"))
    assert changed(before, model, "vqgan.decoder.") and changed(before, model, "vqgan.encoder.")


TINY_VQGAN = dict(ch=32, ch_mult=[1, 2], num_res_blocks=1, z_channels=8, n_embed=64)


def test_dead_codes_restart_onto_encoder_outputs():
    from zoo.rcg.module import VQGANModule

    torch.manual_seed(0)
    model = VQGANModule(vqgan=TINY_VQGAN, restart_dead_codes_every=1)
    images = torch.rand(4, 3, 16, 16)
    z = model.vqgan.encoder(images).detach()  # (4, 8, 8, 8)
    rows = z.permute(0, 2, 3, 1).reshape(-1, 8)
    assert model._restart_dead_codes(z) == 64  # nothing was hit yet: the whole codebook starts on the data
    weight = model.vqgan.quantize.embedding.weight.detach()
    def on_the_data(codes):  # each code equals one of the encoder outputs exactly
        return (codes[:, None, :] == rows[None]).all(-1).any(-1)

    assert on_the_data(weight).all()
    live = weight[:5].clone()
    model.code_hits[:5] = 1
    model.vqgan.quantize.embedding.weight.data[5:] = 1e6  # dead codes far away from the data
    assert model._restart_dead_codes(z) == 59
    assert torch.equal(model.vqgan.quantize.embedding.weight[:5], live)  # used codes are kept
    assert on_the_data(model.vqgan.quantize.embedding.weight.detach()[5:]).all()
    assert model.code_hits.sum() == 0  # counting starts afresh


def test_vqgan_training_with_restarts_uses_more_codes_than_without(image_folder):
    from zoo.rcg.module import VQGANModule

    usage = {}
    for every in (0, 2):
        L.seed_everything(0)
        model = VQGANModule(vqgan={**TINY_VQGAN, "n_embed": 1024}, lr=1e-3, restart_dead_codes_every=every)
        fit(model, data_for(image_folder, "vqgan", batch_size=8), steps=6)
        data = data_for(image_folder, "vqgan", batch_size=8)
        data.setup("fit")
        with torch.no_grad():
            images = torch.cat([batch[0] for batch in data.train_dataloader()])
            usage[every] = model.vqgan.encode(images).unique().numel()
    assert usage[2] > 2 * usage[0], usage  # the uniform(+-1/n) init leaves most codes dead


def test_pipeline_finetunes_mage_only(converted, image_folder):
    model = zoo.load(converted["pipeline"])
    before = snapshot(model)
    fit(model, data_for(image_folder, "mage"))
    assert changed(before, model, "mage.")
    assert not any(changed(before, model, p) for p in ("encoder.", "vqgan.", "rdm."))


def test_mocov3_pretraining_from_scratch(image_folder, tmp_path):
    model = MocoV3Module(encoder=TINY_ENCODER, predictor_hidden_dim=32, warmup_epochs=0)
    before = snapshot(model)
    fit(model, data_for(image_folder, "mocov3"), steps=3)
    assert changed(before, model, "encoder.blocks.") and changed(before, model, "momentum_encoder.blocks.")
    assert not changed(before, model, "encoder.patch_embed.")  # MoCo v3 freezes the patch projection
    assert not changed(before, model, "encoder.pos_embed")  # fixed sin-cos table
    model.save_pretrained(tmp_path / "moco")
    reloaded = zoo.load(tmp_path / "moco")
    images = torch.rand(2, 3, 32, 32)
    assert torch.allclose(reloaded.encode(images), model.encode(images))


def test_stage_inits_load_the_frozen_parts(converted, image_folder):
    rdm = RDMModule(rdm=dict(in_channels=16, time_embed_dim=8, model_channels=16, bottleneck_channels=8,
                             num_res_blocks=1, context_channels=4),
                    encoder=zoo.load(converted["moco"]).hparams["encoder"], encoder_init=str(converted["moco"]))
    fit(rdm, data_for(image_folder, "rdm"), steps=1)
    reference = zoo.load(converted["moco"]).encoder.state_dict()
    assert all(torch.equal(v, rdm.encoder.state_dict()[k]) for k, v in reference.items())
    missing = RDMModule(rdm=dict(in_channels=16, model_channels=16, bottleneck_channels=8, num_res_blocks=1),
                        encoder=TINY_ENCODER)
    with pytest.raises(ValueError, match="encoder_init"):
        fit(missing, data_for(image_folder, "rdm"), steps=1)


def test_stage_inits_take_hf_uris(hub):
    """``encoder_init`` resolves names as zoo.load does (a copy of the resolver once refused ``hf://``)."""
    moco = MocoV3Module(encoder=TINY_ENCODER, predictor_hidden_dim=32)
    zoo.publish(moco, "hf://user/tiny-moco")
    rdm = RDMModule(rdm=dict(in_channels=16, model_channels=16, bottleneck_channels=8, num_res_blocks=1),
                    encoder=TINY_ENCODER, encoder_init="hf://user/tiny-moco")
    rdm.setup("fit")
    assert all(torch.equal(v, rdm.encoder.state_dict()[k]) for k, v in moco.encoder.state_dict().items())


def test_modules_pickle_for_ddp_spawn(converted):
    for name in ("rdm", "mage", "pipeline"):
        model = zoo.load(converted[name])
        clone = pickle.loads(pickle.dumps(model))
        assert set(clone.state_dict()) == set(model.state_dict())


@pytest.mark.slow
def test_rdm_stage_trains_with_ddp_spawn_on_two_cpu_processes(converted, image_folder):
    model = zoo.load(converted["rdm"])
    trainer = L.Trainer(max_steps=2, accelerator="cpu", devices=2, strategy="ddp_spawn", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        limit_val_batches=0)
    trainer.fit(model, datamodule=data_for(image_folder, "rdm", batch_size=2))
    assert trainer.state.finished


def test_unconditional_mage_baseline_trains_and_samples(converted, image_folder):
    vqgan_hp = zoo.load(converted["mage"]).hparams["vqgan"]
    mage = dict(codebook_size=32, num_tokens=256, embed_dim=16, depth=1, num_heads=2, decoder_embed_dim=16,
                decoder_depth=1, decoder_num_heads=2, use_rep=False)
    from zoo.rcg.module import MAGEModule

    model = MAGEModule(mage=mage, vqgan=vqgan_hp, vqgan_init=str(converted["mage"]), warmup_epochs=0)
    assert model.encoder is None and not hasattr(model.mage, "fake_latent")
    before = snapshot(model)
    fit(model, data_for(image_folder, "mage"))
    assert changed(before, model, "mage.")
    tokenizer = zoo.load(converted["mage"]).vqgan.state_dict()  # loaded from vqgan_init, then kept frozen
    assert all(torch.equal(v, model.vqgan.state_dict()[k]) for k, v in tokenizer.items())
    images = model.sample(3, steps=3, seed=0, batch_size=2)
    assert images.shape == (3, 3, 32, 32) and torch.equal(images, model.sample(3, steps=3, seed=0, batch_size=2))


def test_adversarial_loss_gives_each_part_only_its_own_gradient():
    from zoo.rcg.module import VQGANModule

    torch.manual_seed(0)
    model = VQGANModule(vqgan=TINY_VQGAN, adversarial_weight=0.5, discriminator_channels=8, discriminator_layers=2)
    images = torch.rand(4, 3, 16, 16)
    loss = model._step(images, "train")
    loss.backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}

    # the same batch by hand: discriminator <- hinge loss only; tokenizer <- rec + vq + weight * (-D(recon))
    model.zero_grad()
    recon, vq_loss, _ = model.vqgan(images)
    critic = 0.5 * (torch.relu(1 - model.discriminator(images)).mean()
                    + torch.relu(1 + model.discriminator(recon.detach())).mean())
    critic.backward()
    for name, p in model.discriminator.named_parameters():
        torch.testing.assert_close(got[f"discriminator.{name}"], p.grad)
    model.zero_grad()
    recon, vq_loss, _ = model.vqgan(images)
    rec = torch.nn.functional.l1_loss(recon, images) + torch.nn.functional.mse_loss(recon, images)
    generator = -model.discriminator(recon).mean()
    last = model.vqgan.decoder.conv_out.weight
    norms = [torch.autograd.grad(x, last, retain_graph=True)[0].norm() for x in (rec, generator)]
    (rec + vq_loss + 0.5 * (norms[0] / (norms[1] + 1e-4)) * generator).backward()
    for name, p in model.vqgan.named_parameters():
        torch.testing.assert_close(got[f"vqgan.{name}"], p.grad, rtol=1e-4, atol=1e-6)


def test_vqgan_trains_with_the_discriminator_from_its_start_step(image_folder):
    from zoo.rcg.module import VQGANModule

    for start, discriminator_trains in ((2, False), (0, True)):
        L.seed_everything(0)
        model = VQGANModule(vqgan=TINY_VQGAN, adversarial_weight=0.1, adversarial_start=start,
                            discriminator_channels=8, discriminator_layers=2)
        before = snapshot(model)
        trainer = fit(model, data_for(image_folder, "vqgan"), steps=2)
        assert bool(changed(before, model, "discriminator.")) == discriminator_trains
        assert changed(before, model, "vqgan.decoder.")
        assert trainer.global_step == 2  # one optimizer: a batch is one step
    with pytest.raises(ValueError, match="adversarial_weight and adversarial_start must be >= 0"):
        VQGANModule(vqgan=TINY_VQGAN, adversarial_weight=-1.0)


def test_training_order_is_seeded_per_epoch_and_resumes_mid_epoch(image_folder):
    assert_training_order_resumes(lambda: data_for(image_folder, "mage", batch_size=2))
