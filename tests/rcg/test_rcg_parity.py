"""Fixture parity of every RCG component against outputs of the official code (fp32, max abs error <= 1e-5)."""

import pytest
import torch
from rcg_testdata import FIXTURES, io, max_err
from safetensors.torch import load_file

import zoo
from zoo.rcg.model import ddim_parameters, ddim_sample, ddim_timesteps, sincos_pos_embed_2d, timestep_embedding

TOL = 1e-5


# ----------------------------------------------------------------------------------------------------- encoder
def test_encoder_preprocess_features_projector_and_standardisation(converted):
    moco = zoo.load(converted["moco"])
    data = io("encoder_tiny")
    enc = moco.encoder
    x = enc.preprocess(data["images"])
    assert x.shape == (3, 3, 224, 224)
    assert max_err(x[:, :, :16, :16], data["resized_input_patch0"]) <= TOL
    assert max_err(x.mean(dim=(2, 3)), data["resized_input_mean"]) <= TOL
    with torch.no_grad():
        assert max_err(enc.cls_feature(x), data["cls_feature"]) <= TOL
        assert max_err(enc(x), data["projector_out"]) <= TOL
    rep = moco.encode(data["images"])
    assert max_err(rep, data["rep"]) <= TOL
    assert torch.allclose(rep.mean(-1), torch.zeros(3), atol=1e-5)
    assert torch.allclose(rep.std(-1), torch.ones(3), atol=1e-5)  # unbiased std, no epsilon


def test_sincos_position_table_matches_official_checkpoint():
    state = torch.load(FIXTURES / "encoder_tiny" / "moco_vit_tiny.pth.tar", weights_only=True)["state_dict"]
    official = state["module.base_encoder.pos_embed"]
    assert max_err(sincos_pos_embed_2d(14, 16), official) <= 1e-6


# ------------------------------------------------------------------------------------------------------- RDM
@pytest.mark.parametrize("name", ["rdm", "rdm_cc"])
def test_rdm_denoiser_raw_and_ema_weights(converted, name):
    module = zoo.load(converted[name])
    data = io("rdm_tiny" if name == "rdm" else "rdm_tiny_cc")
    rdm = module.rdm
    ctx = rdm.context(data["class_label"])
    if name == "rdm_cc":
        assert max_err(ctx, data["context"]) <= TOL
    else:
        assert ctx is None  # unconditional: the embedding exists but is unused
    with torch.no_grad():
        # sin/cos of float32 arguments up to ~1000 (ulp 6e-5): the result depends on the CPU's libm (1.3e-5 seen)
        assert max_err(timestep_embedding(data["t"], rdm.config.model_channels), data["timestep_embedding"]) <= 1e-4
        assert max_err(rdm.denoiser(data["x_t"], data["t"], ctx), data["out_raw"]) <= TOL
        assert max_err(module.ema.shadow(data["x_t"], data["t"], ctx), data["out_ema"]) <= TOL
        eps = rdm.schedule.eps_from_x0(data["x_t"], data["t"], data["out_ema"])
        assert max_err(eps, data["eps_from_x0_ema"]) <= TOL
        x_noisy = rdm.schedule.q_sample(data["train_x0"], data["train_t"], data["train_noise"])
        assert max_err(x_noisy, data["train_x_noisy"]) <= TOL
        loss = rdm.loss(data["train_x0"], data["class_label"], t=data["train_t"], noise=data["train_noise"])
        assert abs(loss.item() - data["train_loss_raw"].item()) <= TOL


@pytest.mark.parametrize("name", ["rdm", "rdm_cc"])
@pytest.mark.parametrize("steps", [250, 25])
def test_rdm_ddim_eta0_trajectory_with_ema_weights(converted, name, steps):
    module = zoo.load(converted[name])
    data = io("rdm_tiny" if name == "rdm" else "rdm_tiny_cc")
    ctx = module.rdm.context(data["class_label"])
    out = ddim_sample(module.ema.shadow, module.rdm.schedule, data["ddim_x_T"], ctx, steps, eta=0.0)
    assert max_err(out, data[f"ddim{steps}_eta0_sample"]) <= TOL


def test_rdm_schedule_and_ddim_parameters(converted):
    schedule = zoo.load(converted["rdm"]).rdm.schedule
    ref = load_file(str(FIXTURES / "rdm_tiny" / "schedule.safetensors"))
    for key in ("betas", "alphas_cumprod", "alphas_cumprod_prev", "sqrt_recip_alphas_cumprod",
                "sqrt_recipm1_alphas_cumprod"):
        assert max_err(getattr(schedule, key), ref[key]) <= 1e-7, key
    steps = ddim_timesteps(250)
    assert torch.equal(steps, ref["ddim250_timesteps"])
    assert torch.equal(ddim_timesteps(25), ref["ddim25_timesteps"])
    assert len(ddim_timesteps(30)) == 31 and ddim_timesteps(30)[-1] == 991  # range(0, 1000, 33) + 1
    with pytest.raises(ValueError, match="rdm_steps=3 puts the last DDIM step at t=1000"):
        ddim_timesteps(3)  # range(0, 1000, 333) + 1 ends at 1000: the official sampler's IndexError
    alphas, alphas_prev, sigmas = ddim_parameters(schedule.alphas_cumprod, steps, eta=1.0)
    assert max_err(alphas, ref["ddim250_alphas"]) == 0.0
    assert max_err(alphas_prev, ref["ddim250_alphas_prev"]) == 0.0
    assert alphas_prev[0] == schedule.alphas_cumprod[0] < 1.0  # the official quirk
    assert max_err(sigmas, ref["ddim250_sigmas_eta1"]) <= 1e-7


def test_schedule_stays_float32_in_half_precision(converted):
    module = zoo.load(converted["rdm"], dtype="bfloat16")
    assert module.rdm.denoiser.input_proj.weight.dtype == torch.bfloat16
    assert module.rdm.schedule.alphas_cumprod.dtype == torch.float32
    ref = load_file(str(FIXTURES / "rdm_tiny" / "schedule.safetensors"))
    assert max_err(module.rdm.schedule.alphas_cumprod, ref["alphas_cumprod"]) == 0.0


# ----------------------------------------------------------------------------------------------------- VQGAN
def test_vqgan_encode_quantise_decode(converted):
    vq = zoo.load(converted["vqgan"]).vqgan
    data = io("vqgan_tiny")
    with torch.no_grad():
        z = vq.encoder(data["images"])
        assert max_err(z, data["encoder_out"]) <= TOL
        codes = vq.quantize.codes(z)
        assert torch.equal(codes, data["codes"])
        assert torch.equal(vq.encode(data["images"]), data["codes"])
        z_q = vq.quantize.lookup(codes, (16, 16))
        assert max_err(z_q, data["z_q"]) <= TOL
        assert max_err(vq.decoder(z_q), data["decoded_from_images"]) <= TOL
        assert max_err(vq.decode_codes(data["codes_in"]), data["decoded_from_codes"]) <= TOL


# ------------------------------------------------------------------------------------------------------ MAGE
def test_mage_training_forward_logits_and_loss(converted):
    module = zoo.load(converted["mage"])
    mage, data = module.mage, io("mage_tiny")
    K = mage.config.codebook_size
    assert (mage.config.vocab_size, mage.config.mask_id, mage.config.fake_class_id) == (1033, 1032, 108)
    with torch.no_grad():
        assert max_err(module.encoder.represent(data["images"]), data["rep"]) <= TOL
        assert torch.equal(module.vqgan.encode(data["images"]), data["gt_indices"])
        drop = data["token_drop_mask"][:, 1:].bool()
        masked = data["token_all_mask"][:, 1:].bool()
        logits = mage(data["gt_indices"], data["rep"], drop, masked)
        assert max_err(logits[..., :K], data["train_logits_codebook"]) <= TOL
        assert max_err(logits[0, :4], data["train_logits_full_b0_pos0to3"]) <= TOL
        assert abs(mage.loss(data["gt_indices"], logits, masked).item() - data["train_loss"].item()) <= TOL
        fake = mage.fake_latent.expand(2, -1)
        fake_logits = mage(data["gt_indices"], fake, drop, masked)
        assert max_err(fake_logits[0, :, :K], data["train_fake_logits_codebook_b0"]) <= TOL
        assert abs(mage.loss(data["gt_indices"], fake_logits, masked).item() - data["train_fake_loss"].item()) <= TOL


def test_mage_generation_step_logits_conditional_and_fake_latent(converted):
    mage = zoo.load(converted["mage"]).mage
    data = io("mage_tiny")
    ids = data["gen_input_ids"]
    unknown = ids == mage.config.mask_id
    assert unknown[0].all() and not unknown[1].all()
    none_dropped = torch.zeros_like(unknown)
    with torch.no_grad():
        cond = mage(ids, data["gen_rep"], none_dropped, unknown)[:, 1:, : mage.config.codebook_size]
        assert max_err(cond, data["gen_logits_cond"]) <= TOL
        uncond = mage(ids[:1], mage.fake_latent, none_dropped[:1], unknown[:1])[0, 1:, : mage.config.codebook_size]
        assert max_err(uncond, data["gen_logits_uncond_b0"]) <= TOL


def test_mage_sampled_masks_follow_the_official_counts():
    from zoo.rcg.model import MAGE, MAGEConfig

    mage = MAGE(MAGEConfig(codebook_size=8, num_tokens=256, embed_dim=8, depth=1, num_heads=2, decoder_embed_dim=8,
                           decoder_depth=1, decoder_num_heads=2, rep_dim=4))
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        drop, masked = mage.sample_masks(3, "cpu", g)
        assert (drop.sum(1) == 128).all()  # ceil(256 * 0.5)
        n_mask = masked.sum(1)
        assert (n_mask == n_mask[0]).all() and 128 <= n_mask[0] <= 256
        assert not (drop & ~masked).any()  # dropped positions are masked too
