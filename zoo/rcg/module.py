"""LightningModules for the RCG stages: MoCo v3 pretraining, VQGAN tokenizer, RDM (with EMA), MAGE.

Stages that use frozen parts of an earlier stage (RDM and MAGE use the encoder, MAGE the tokenizer) take
``encoder_init`` / ``vqgan_init``: a zoo repo folder or catalog name whose ``encoder.*`` / ``vqgan.*`` weights are
copied in when training starts (not when a saved stage is loaded: those weights are already in its file).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from zoo.hparams import dataclass_from_dict
from zoo.hub import resolve_repo
from zoo.io import load_state_dict
from zoo.lightning_compat import attached_trainer
from zoo.module import ZooModule, plain
from zoo.rcg.model import (MAGE, RDM, VQGAN, EncoderConfig, MAGEConfig, MocoViT, PatchDiscriminator, RDMConfig,
                           VQGANConfig, build_mlp)
from zoo.schedules import warmup_cosine
from zoo.training import EMA, weight_decay_groups

__all__ = ["MocoV3Module", "VQGANModule", "RDMModule", "MAGEModule", "MAGETraining", "network", "mage_targets",
           "load_prefixed", "eval_mode", "seeded_generator"]


# ------------------------------------------------------------------------------------------------------- shared helpers
def _adamw_warmup_cosine(stage: ZooModule, params, lr: float, **adamw) -> dict[str, Any]:
    """AdamW with a per-step schedule: linear warm-up over the stage's ``warmup_epochs``, then cosine decay."""
    trainer = stage.trainer
    total = max(1, int(trainer.estimated_stepping_batches))
    epochs = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else 1
    warmup = int(round(stage.hparams.warmup_epochs * total / epochs))
    return warmup_cosine(torch.optim.AdamW(params, lr=lr, **adamw), warmup, total)


def _effective_batch(trainer, default: int) -> int:
    """Per-device batch x devices x accumulation (the official lr scaling uses the effective batch)."""
    trainer.estimated_stepping_batches  # noqa: B018  (sets up the train dataloader)
    batch_size = getattr(trainer.train_dataloader, "batch_size", None) or default
    return batch_size * max(1, trainer.world_size) * max(1, trainer.accumulate_grad_batches)


def _images_and_labels(batch) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A batch of images (or representations) alone, or with labels: (images, labels) or (images,)."""
    if isinstance(batch, torch.Tensor):
        return batch, None
    return batch[0], (batch[1] if len(batch) > 1 else None)


def seeded_generator(device, seed: int | None) -> torch.Generator | None:
    return torch.Generator(device).manual_seed(int(seed)) if seed is not None else None


def load_prefixed(module: nn.Module, name_or_path: str, prefix: str) -> None:
    """Copy the ``prefix``-ed tensors of a zoo repo (any name ``zoo.load`` takes) into ``module``, strictly."""
    state = load_state_dict(resolve_repo(name_or_path))
    sub = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    if not sub:
        raise ValueError(f"{name_or_path} holds no '{prefix}*' weights; pass a repo of an RCG stage that has them")
    module.load_state_dict(sub, strict=True)


@contextmanager
def eval_mode(module: nn.Module):
    """Run inference with dropout off, then restore the caller's train/eval state."""
    was_training = module.training
    module.train(False)
    try:
        yield module
    finally:
        module.train(was_training)


_NETWORKS = {"encoder": (MocoViT, EncoderConfig), "rdm": (RDM, RDMConfig), "mage": (MAGE, MAGEConfig),
             "vqgan": (VQGAN, VQGANConfig)}


def network(kind: str, values: dict | None) -> nn.Module:
    """The ``kind`` network ("encoder", "rdm", "mage" or "vqgan") built from its hyperparameter dict."""
    cls, config = _NETWORKS[kind]
    return cls(dataclass_from_dict(config, values, kind))


class _RCGStage(ZooModule):
    method = "rcg"
    _frozen: tuple[str, ...] = ()  # submodules that stay frozen and in eval mode

    def parts_in_eval_mode(self) -> list[nn.Module]:
        return [part for name in self._frozen if (part := getattr(self, name, None)) is not None]

    def _freeze(self) -> None:
        """End of ``__init__``: the frozen parts get no gradients (and stay in eval mode: ``parts_in_eval_mode``)."""
        for part in self.parts_in_eval_mode():
            part.requires_grad_(False).eval()

    @property
    def config(self) -> dict[str, Any]:
        """The hyperparameters with each network config's entries as the values they were read as: a command-line
        override (``--model.init_args.vqgan.n_embed=1024``) arrives as the text "1024", and config.json, which
        ``zoo.load`` reads strictly, must hold the number."""
        config = super().config
        for key, (_, kind) in _NETWORKS.items():
            if isinstance(config.get(key), dict):
                decoded = dataclass_from_dict(kind, config[key], key)
                config[key] = {name: plain(getattr(decoded, name)) for name in config[key]}
        return config

    @classmethod
    def from_repo_dir(cls, directory, hparams, *, device, dtype, **kwargs):
        # repos may store half-precision weights to stay small; they compute in float32 unless asked otherwise
        return super().from_repo_dir(directory, hparams, device=device, dtype=dtype or torch.float32, **kwargs)

    def load_weights_(self, state: dict[str, torch.Tensor]) -> None:
        super().load_weights_(state)
        self._pretrained_loaded = True

    def training_step(self, batch, batch_idx):
        loss = self.batch_loss(batch)  # each stage's own loss
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def setup(self, stage: str) -> None:
        """Training starts: copy in each frozen part that has a ``<part>_init`` hyperparameter."""
        if stage != "fit" or getattr(self, "_pretrained_loaded", False):
            return
        for prefix in self._frozen:
            if getattr(self, prefix, None) is None or f"{prefix}_init" not in self.hparams:
                continue
            source = self.hparams[f"{prefix}_init"]
            if source is None:
                raise ValueError(f"{type(self).__name__} trains on a frozen pretrained {prefix}: set `{prefix}_init` "
                                 f"to a zoo repo folder or catalog name holding '{prefix}.*' weights (or load a saved "
                                 "stage with zoo.load)")
            load_prefixed(getattr(self, prefix), source, f"{prefix}.")
        self._pretrained_loaded = True


# ---------------------------------------------------------------------------------- MoCo v3 self-supervised pretraining
class MocoV3Module(_RCGStage):
    """MoCo v3 (ViT): base encoder + projector, momentum encoder, predictor; symmetric InfoNCE with temperature.

    Batches are pairs of augmented views of normalised images (:class:`zoo.rcg.data.ImageDataModule`,
    ``stage="mocov3"``); the base encoder is RCG's representation encoder."""

    model_type = "rcg-mocov3"

    def __init__(self, encoder: dict | None = None, predictor_hidden_dim: int = 4096, temperature: float = 0.2,
                 momentum: float = 0.99, blr: float = 1.5e-4, weight_decay: float = 0.1, warmup_epochs: float = 40,
                 stop_grad_patch_embed: bool = True):
        super().__init__()
        self.save_hyperparameters()
        self.encoder, self.momentum_encoder = network("encoder", encoder), network("encoder", encoder)
        self.momentum_encoder.load_state_dict(self.encoder.state_dict())
        self.momentum_encoder.requires_grad_(False)
        rep_dim = self.encoder.config.rep_dim
        self.predictor = build_mlp(2, rep_dim, predictor_hidden_dim, rep_dim)
        if stop_grad_patch_embed:  # MoCo v3's "random patch projection" trick for stability
            self.encoder.patch_embed.requires_grad_(False)

    @torch.no_grad()
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        with eval_mode(self.encoder):
            return self.encoder.represent(images.to(self.encoder.cls_token.dtype)).float()

    def _contrastive(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        q, k = F.normalize(q, dim=1), F.normalize(k, dim=1)
        offset, trainer = 0, attached_trainer(self)
        if trainer is not None and trainer.world_size > 1:
            k = self.all_gather(k).flatten(0, 1)
            offset = q.shape[0] * self.global_rank
        logits = q @ k.t() / self.hparams.temperature
        labels = torch.arange(q.shape[0], device=q.device) + offset
        return F.cross_entropy(logits, labels) * (2 * self.hparams.temperature)

    def batch_loss(self, batch) -> torch.Tensor:
        x1, x2 = batch[0]  # ([view1, view2], labels) from the two-crop transform
        q1, q2 = self.predictor(self.encoder(x1)), self.predictor(self.encoder(x2))
        with torch.no_grad():
            self._momentum_update()
            k1, k2 = self.momentum_encoder(x1), self.momentum_encoder(x2)
        return self._contrastive(q1, k2) + self._contrastive(q2, k1)

    @torch.no_grad()
    def _momentum_update(self) -> None:
        trainer = attached_trainer(self)
        total = max(1, int(trainer.estimated_stepping_batches)) if trainer is not None else 1
        m0 = self.hparams.momentum
        m = 1.0 - 0.5 * (1.0 + math.cos(math.pi * self.global_step / total)) * (1.0 - m0)  # cosine m0 -> 1
        for pk, pq in zip(self.momentum_encoder.parameters(), self.encoder.parameters(), strict=True):
            pk.mul_(m).add_(pq.detach(), alpha=1.0 - m)

    def configure_optimizers(self):
        lr = self.hparams.blr * _effective_batch(self.trainer, 256) / 256
        params = [p for n, p in self.named_parameters() if p.requires_grad and not n.startswith("momentum_encoder.")]
        return _adamw_warmup_cosine(self, params, lr, weight_decay=self.hparams.weight_decay)


# ------------------------------------------------------------------------------------------------------ VQGAN tokenizer
class VQGANModule(_RCGStage):
    """MaskGIT-style VQGAN trained with reconstruction (L1 + MSE) and codebook/commitment losses.

    ``adversarial_weight`` > 0 adds, from step ``adversarial_start`` on, a hinge-loss
    :class:`~zoo.rcg.model.PatchDiscriminator` (``discriminator.*``) and the generator term ``-D(reconstruction)``
    times ``adversarial_weight`` and the adaptive weight ||grad rec|| / ||grad adv|| at the decoder's last layer
    (clamped to 1e4). One loss, one optimizer: each part sees the other's weights or output detached, so it gets
    only its own gradient and ``global_step`` counts batches.

    ``restart_dead_codes_every`` > 0 (training only; the official tokenizer trains without it): every that many
    steps, the codes no token chose since the last restart move onto random encoder outputs of the batch (at the
    first step, the whole codebook). Without it a small codebook collapses onto a few dozen codes (36 of 256 on
    Fashion-MNIST), which blurs every image."""

    model_type = "rcg-vqgan"

    def __init__(self, vqgan: dict | None = None, lr: float = 1e-4, betas: tuple[float, float] | list[float] = (0.5, 0.9),
                 weight_decay: float = 0.0, warmup_epochs: float = 0.0, codebook_weight: float = 1.0,
                 restart_dead_codes_every: int = 0, adversarial_weight: float = 0.0, adversarial_start: int = 0,
                 discriminator_channels: int = 64, discriminator_layers: int = 3):
        super().__init__()
        self.save_hyperparameters()
        self.vqgan = network("vqgan", vqgan)
        if adversarial_weight < 0 or adversarial_start < 0:
            raise ValueError(f"adversarial_weight and adversarial_start must be >= 0 (0 turns the adversarial loss "
                             f"off); got {adversarial_weight} and {adversarial_start}")
        self.discriminator = (PatchDiscriminator(self.vqgan.config.out_ch, discriminator_channels, discriminator_layers)
                              if adversarial_weight > 0 else None)
        # hits per code since the last restart; not saved (a resumed run starts counting afresh)
        self.register_buffer("code_hits", torch.zeros(self.vqgan.config.n_embed), persistent=False)

    def reset_buffers(self, device) -> None:
        self.code_hits = torch.zeros(self.vqgan.config.n_embed, device=device)

    @torch.no_grad()
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        return self.vqgan.encode(images)

    @torch.no_grad()
    def _restart_dead_codes(self, z: torch.Tensor) -> int:
        """Move the codes with no hits onto random rows of z (B, C, h, w); reset their Adam moments."""
        dead = (self.code_hits == 0).nonzero().squeeze(1)
        if dead.numel():
            flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])  # (B*h*w, C)
            weight = self.vqgan.quantize.embedding.weight
            weight[dead] = flat[torch.randint(flat.shape[0], (dead.numel(),), device=flat.device)].to(weight.dtype)
            trainer = attached_trainer(self)
            for optimizer in trainer.optimizers if trainer is not None else ():
                for moment in optimizer.state.get(weight, {}).values():
                    if moment.ndim == 2:
                        moment[dead] = 0
        self.code_hits.zero_()
        return dead.numel()

    def _step(self, batch, stage: str):
        images, _ = _images_and_labels(batch)
        every = self.hparams.restart_dead_codes_every
        z = self.vqgan.encoder(images)
        if stage == "train" and every > 0 and self.global_step % every == 0:
            self.log("train/restarted_codes", float(self._restart_dead_codes(z.detach())))
        recon, vq_loss, codes = self.vqgan.reconstruct_latents(z)
        if stage == "train":
            self.code_hits += torch.bincount(codes.flatten(), minlength=self.code_hits.numel()).to(self.code_hits.dtype)
        rec_loss = F.l1_loss(recon, images) + F.mse_loss(recon, images)
        loss = rec_loss + self.hparams.codebook_weight * vq_loss
        used = codes.unique().numel() / self.vqgan.config.n_embed
        logs = {f"{stage}/rec": rec_loss, f"{stage}/vq": vq_loss, f"{stage}/codebook_usage": used}
        if stage == "train" and self.discriminator is not None and self.global_step >= self.hparams.adversarial_start:
            generator_loss, critic_loss, weight = self._adversarial_losses(images, recon, rec_loss)
            loss = loss + weight * generator_loss + critic_loss
            logs.update({"train/generator": generator_loss, "train/critic": critic_loss, "train/adaptive_weight": weight})
        self.log_dict({f"{stage}/loss": loss, **logs}, prog_bar=stage == "train")
        return loss

    def _adversarial_losses(self, images, recon, rec_loss):
        """(generator loss, discriminator hinge loss, generator weight) for one batch."""
        frozen = {name: p.detach() for name, p in self.discriminator.named_parameters()}
        generator_loss = -torch.func.functional_call(self.discriminator, frozen, (recon,)).mean()
        last = self.vqgan.decoder.conv_out.weight
        rec_grad = torch.autograd.grad(rec_loss, last, retain_graph=True)[0]
        generator_grad = torch.autograd.grad(generator_loss, last, retain_graph=True)[0]
        adaptive = (rec_grad.norm() / (generator_grad.norm() + 1e-4)).clamp(max=1e4).detach()
        real, fake = self.discriminator(images), self.discriminator(recon.detach())
        critic_loss = 0.5 * (F.relu(1.0 - real).mean() + F.relu(1.0 + fake).mean())
        return generator_loss, critic_loss, self.hparams.adversarial_weight * adaptive

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def configure_optimizers(self):
        return _adamw_warmup_cosine(self, self.parameters(), self.hparams.lr, betas=tuple(self.hparams.betas),
                                    weight_decay=self.hparams.weight_decay)


# ------------------------------------------------------------------------------------------------------------------ RDM
class RDMModule(_RCGStage):
    """Representation diffusion model on a frozen encoder's standardised representations, with EMA weights.

    Keys: ``rdm.*`` (raw weights), ``ema.shadow.*`` + ``ema.num_updates`` (EMA of the denoiser, used for sampling),
    ``encoder.*`` (frozen MoCo v3 encoder; absent when ``encoder`` is None: batches then carry representations)."""

    model_type = "rcg-rdm"
    _frozen = ("encoder",)

    def __init__(self, rdm: dict | None = None, encoder: dict | None = None, encoder_init: str | None = None,
                 blr: float = 1e-6, weight_decay: float = 0.01, ema_decay: float = 0.9999):
        super().__init__()
        self.save_hyperparameters()
        self.rdm = network("rdm", rdm)
        self.ema = EMA(self.rdm.denoiser, ema_decay)
        self.encoder = network("encoder", encoder) if encoder is not None else None
        self._freeze()

    def representations(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        data, labels = _images_and_labels(batch)
        if data.ndim == 4:
            if self.encoder is None:
                raise ValueError("this RDM has no encoder: feed representations (B, C), or build it with `encoder`")
            data = self.encoder.represent(data.to(self.encoder.cls_token.dtype)).float()
        if not self.rdm.config.use_context or labels is None:
            labels = self.rdm.default_labels(data.shape[0], data.device)
        return data, labels

    def batch_loss(self, batch) -> torch.Tensor:
        return self.rdm.loss(*self.representations(batch))

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self.ema.update(self.rdm.denoiser)

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self.batch_loss(batch))

    def configure_optimizers(self):
        lr = self.hparams.blr * _effective_batch(self.trainer, 128)  # not divided by 256 (official)
        params = [p for p in self.rdm.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=lr, weight_decay=self.hparams.weight_decay)


# ----------------------------------------------------------------------------------------------------------------- MAGE
def mage_targets(mage: MAGE, vqgan: VQGAN, encoder: MocoViT | None, images: torch.Tensor):
    """(token ids (B, N), representations (B, rep_dim) or None) of images from the frozen tokenizer and encoder, in
    their own precision even under autocast: bf16 would change about 5% of the token ids (nearest codes are close)."""
    with torch.no_grad(), torch.autocast(images.device.type, enabled=False):
        codes = vqgan.encode(images.to(vqgan.encoder.conv_in.weight.dtype))
        rep = encoder.represent(images.to(encoder.cls_token.dtype)) if mage.config.use_rep else None
    return codes, rep


class MAGETraining(_RCGStage):
    """The pixel generator's training over its frozen VQGAN and encoder, and token decoding (MAGEModule, pipeline)."""

    def _model_device(self) -> torch.device:
        return self.mage.decoder_pos_embed_learned.device

    @torch.no_grad()
    def decode_tokens(self, codes: torch.Tensor) -> torch.Tensor:
        """VQGAN ids (B, N) -> images (B, 3, H, W) clamped to [0, 1], float32."""
        return self.vqgan.decode_codes(codes).float().clamp(0, 1)

    def batch_loss(self, batch) -> torch.Tensor:
        """Label-smoothed CE over masked tokens, given the frozen encoder's reps (some replaced by the fake latent)."""
        images, _ = _images_and_labels(batch)
        codes, rep = mage_targets(self.mage, self.vqgan, self.encoder, images)
        if rep is not None:
            rep = self.mage.training_rep(rep)
        drop_mask, all_mask = self.mage.sample_masks(codes.shape[0], codes.device)
        return self.mage.loss(codes, self.mage(codes, rep, drop_mask, all_mask), all_mask)

    def configure_optimizers(self):
        """AdamW over the MAGE weights (no decay on norms and biases) at blr x effective batch / 256, warmup-cosine."""
        lr = self.hparams.blr * _effective_batch(self.trainer, 4096) / 256
        betas = tuple(self.hparams.get("betas", (0.9, 0.95)))
        return _adamw_warmup_cosine(self, weight_decay_groups(self.mage, self.hparams.weight_decay), lr, betas=betas)


class MAGEModule(MAGETraining):
    """MAGE pixel generator trained on ground-truth representations with fake-latent dropout.

    Keys: ``mage.*``, ``vqgan.*`` (frozen tokenizer), ``encoder.*`` (frozen MoCo v3 encoder; absent for the
    unconditional baseline, ``mage.use_rep = False``)."""

    model_type = "rcg-mage"
    _frozen = ("encoder", "vqgan")

    def __init__(self, mage: dict | None = None, vqgan: dict | None = None, encoder: dict | None = None,
                 encoder_init: str | None = None, vqgan_init: str | None = None, blr: float = 1.5e-4,
                 weight_decay: float = 0.05, betas: tuple[float, float] | list[float] = (0.9, 0.95),
                 warmup_epochs: float = 10):
        super().__init__()
        self.save_hyperparameters()
        self.mage, self.vqgan = network("mage", mage), network("vqgan", vqgan)
        mage_cfg = self.mage.config
        if mage_cfg.use_rep and encoder is None:
            raise ValueError("a representation-conditioned MAGE (mage.use_rep=True) needs an `encoder` config")
        self.encoder = network("encoder", encoder) if mage_cfg.use_rep else None
        if self.vqgan.config.n_embed != mage_cfg.codebook_size:
            raise ValueError(f"mage.codebook_size {mage_cfg.codebook_size} != vqgan.n_embed {self.vqgan.config.n_embed}")
        self._freeze()

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self.batch_loss(batch))

    @torch.no_grad()
    def sample(self, n: int, *, steps: int = 20, temperature: float = 6.0, seed: int | None = 0,
               batch_size: int | None = None, **unused_rcg_options) -> torch.Tensor:
        """n images without representations: the unconditional baseline (``use_rep=False``), or a conditioned
        MAGE's fake-latent branch. Same signature as the RCG pipeline's ``sample`` (RDM/CFG options ignored)."""
        generator = seeded_generator(self._model_device(), seed)
        out = []
        with eval_mode(self):
            for start in range(0, n, batch_size or n):
                b = min(batch_size or n, n - start)
                rep = self.mage.fake_latent.expand(b, -1) if self.mage.config.use_rep else None
                out.append(self.decode_tokens(self.mage.generate(rep, steps, temperature, 0.0, generator, batch=b)))
        return torch.cat(out)
