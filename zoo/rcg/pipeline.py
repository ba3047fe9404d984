"""The RCG task API: one object that samples images, reconstructs images from their own representations and
encodes images to representations.

    >>> import zoo
    >>> rcg = zoo.load("rcg-imagenet256")
    >>> images = rcg.sample(16, seed=0)            # (16, 3, 256, 256) in [0, 1]

Sampling is RDM (DDIM over the representation space, EMA weights) -> MAGE iterative decoding conditioned on the
sampled representation, with classifier-free guidance against the learned fake latent -> VQGAN decode.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch
from tqdm.auto import tqdm

from zoo.rcg.model import ddim_sample, ddim_timesteps
from zoo.rcg.module import MAGETraining, eval_mode, network, seeded_generator

__all__ = ["RCGPipeline", "SAMPLING_DEFAULTS"]


# MAGE-B settings; catalog entries override them (MAGE-L: temperature 11, cfg 6)
SAMPLING_DEFAULTS: dict[str, Any] = {"cfg": 1.0, "rdm_steps": 250, "eta": 1.0, "steps": 20, "temperature": 6.0}


class RCGPipeline(MAGETraining):
    """Encoder + RDM (EMA weights) + MAGE + VQGAN.

    Keys: ``encoder.*`` (MoCo v3 ViT + projector), ``rdm.*`` (denoiser with the EMA weights and the class
    embedder), ``mage.*``, ``vqgan.*``. ``Trainer.fit`` on a pipeline fine-tunes the pixel generator (MAGE) on
    images with the encoder, tokenizer and RDM frozen; train the RDM with :class:`zoo.rcg.module.RDMModule`."""

    model_type = "rcg-pipeline"
    _frozen = ("encoder", "vqgan", "rdm")

    def __init__(self, encoder: dict | None = None, rdm: dict | None = None, mage: dict | None = None,
                 vqgan: dict | None = None, image_size: int = 256, sampling: dict | None = None,
                 blr: float = 1.5e-4, weight_decay: float = 0.05, warmup_epochs: float = 0):
        super().__init__()
        self.save_hyperparameters()
        self.encoder, self.rdm = network("encoder", encoder), network("rdm", rdm)
        self.mage, self.vqgan = network("mage", mage), network("vqgan", vqgan)
        unknown = sorted(set(sampling or {}) - set(SAMPLING_DEFAULTS))
        if unknown:
            raise ValueError(f"unknown sampling defaults {unknown}; known: {sorted(SAMPLING_DEFAULTS)}")
        reps = {self.encoder.config.rep_dim, self.rdm.config.in_channels, self.mage.config.rep_dim}
        if len(reps) != 1:
            raise ValueError(f"encoder rep_dim, rdm in_channels and mage rep_dim must agree, got {sorted(reps)}")
        grid = image_size // self.vqgan.downsample
        if grid * grid != self.mage.config.num_tokens:
            raise ValueError(f"image_size {image_size} gives {grid}x{grid} VQGAN tokens, MAGE expects "
                             f"{self.mage.config.num_tokens}")
        if not self.mage.config.use_rep:
            raise ValueError("the RCG pipeline needs a representation-conditioned MAGE (mage.use_rep=True)")
        self._freeze()

    @classmethod
    def from_stages(cls, rdm, mage, *, sampling: dict | None = None) -> "RCGPipeline":
        """A pipeline of trained stages: an RDMModule's EMA weights, a MAGEModule's encoder, tokenizer and generator."""
        if mage.encoder is None:
            raise ValueError("the MAGE stage is unconditional (no encoder); RCG needs a representation-conditioned one")
        grid = math.isqrt(mage.mage.config.num_tokens)
        hparams = dict(encoder=mage.hparams["encoder"], rdm=rdm.hparams["rdm"], mage=mage.hparams["mage"],
                       vqgan=mage.hparams["vqgan"], image_size=grid * mage.vqgan.downsample, sampling=sampling)
        state = {**mage.state_dict(),  # encoder.*, mage.*, vqgan.*
                 **{f"rdm.denoiser.{k}": v for k, v in rdm.ema.shadow.state_dict().items()},
                 "rdm.class_embed.weight": rdm.rdm.class_embed.weight}
        return cls.from_state_dict(hparams, {k: v.detach().clone() for k, v in state.items()})

    # ---------------------------------------------------------------------------------------------- helpers
    @property
    def sampling_defaults(self) -> dict[str, Any]:
        return {**SAMPLING_DEFAULTS, **(self.hparams.get("sampling") or {})}

    @property
    def image_size(self) -> int:
        """The side, in pixels, of the images it generates and reconstructs."""
        return self.hparams.image_size

    @property
    def is_class_conditional(self) -> bool:
        return self.rdm.config.use_context

    def _check_images(self, images: torch.Tensor) -> torch.Tensor:
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be (B, 3, H, W) floats in [0, 1], got shape {tuple(images.shape)}")
        if not images.is_floating_point():
            raise ValueError(f"images must be floats in [0, 1] (got {images.dtype}); divide uint8 images by 255")
        return images.to(self._model_device())

    # ------------------------------------------------------------------------------------------------ stages
    @torch.no_grad()
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """[0, 1] images (B, 3, H, W) -> standardised MoCo v3 representations (B, rep_dim), float32."""
        images = self._check_images(images)
        return self.encoder.represent(images.to(self.encoder.cls_token.dtype)).float()

    @torch.no_grad()
    def sample_representations(self, n: int, *, rdm_steps: int | None = None, eta: float | None = None,
                               labels: torch.Tensor | None = None, generator: torch.Generator | None = None,
                               on_step: Callable[[], Any] | None = None) -> torch.Tensor:
        """n representations (n, rep_dim), float32, by DDIM with the RDM's EMA weights; ``on_step`` after each step."""
        d = self.sampling_defaults
        device = self._model_device()
        if labels is None:
            labels = (torch.randint(0, self.rdm.config.n_classes, (n,), device=device, generator=generator)
                      if self.is_class_conditional else self.rdm.default_labels(n, device))
        labels = torch.as_tensor(labels, device=device).long()
        if labels.shape != (n,) or labels.min() < 0 or labels.max() >= self.rdm.config.n_classes:
            raise ValueError(f"labels must be {n} class ids in [0, {self.rdm.config.n_classes})")
        x_T = torch.randn(n, self.rdm.config.in_channels, device=device, generator=generator)
        return ddim_sample(self.rdm.denoiser, self.rdm.schedule, x_T, self.rdm.context(labels),
                           d["rdm_steps"] if rdm_steps is None else rdm_steps, d["eta"] if eta is None else eta,
                           generator, on_step=on_step)

    @torch.no_grad()
    def generate_tokens(self, rep: torch.Tensor, *, cfg: float | None = None, steps: int | None = None,
                        temperature: float | None = None, generator: torch.Generator | None = None,
                        on_step: Callable[[], Any] | None = None) -> torch.Tensor:
        """MAGE iterative decoding conditioned on rep (B, rep_dim) -> VQGAN ids (B, N); ``on_step`` after each step."""
        d = self.sampling_defaults
        rep = rep.to(device=self._model_device(), dtype=self.mage.decoder_pos_embed_learned.dtype)
        steps = d["steps"] if steps is None else steps
        if steps < 1:
            raise ValueError(f"steps (MAGE iterations) must be at least 1, got {steps}")
        return self.mage.generate(rep, steps, d["temperature"] if temperature is None else temperature,
                                  d["cfg"] if cfg is None else cfg, generator, on_step=on_step)

    # ------------------------------------------------------------------------------------------------- task API
    @torch.no_grad()
    def sample(self, n: int, *, cfg: float | None = None, rdm_steps: int | None = None, steps: int | None = None,
               temperature: float | None = None, seed: int | None = 0, batch_size: int | None = None,
               labels: torch.Tensor | None = None, eta: float | None = None, progress: bool = False,
               timings: dict[str, float] | None = None) -> torch.Tensor:
        """Generate n images (n, 3, H, W) in [0, 1] on the model's device, float32.

        ``cfg`` guidance scale (linearly ramped over MAGE steps), ``rdm_steps`` DDIM steps, ``steps`` MAGE
        iterations, ``temperature`` MAGE's Gumbel choice temperature (defaults: the catalog entry's setting). The
        same ``seed`` and ``batch_size`` give the same images. ``labels`` (class-conditional models only): n class
        ids; random classes when omitted. ``timings``, if given, receives seconds spent in rdm / mage / vqgan."""
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        if labels is not None and not self.is_class_conditional:
            raise ValueError("labels were given but this RCG model is unconditional")
        batch_size = batch_size or n
        generator = seeded_generator(self._model_device(), seed)
        clock = timings if timings is not None else {}
        batches = range(0, n, batch_size)
        d = self.sampling_defaults
        # one bar over every RDM step and MAGE iteration: a batch takes minutes on a CPU, so a per-batch bar stalls
        ddim_steps = ddim_timesteps(d["rdm_steps"] if rdm_steps is None else rdm_steps, self.rdm.schedule.timesteps)
        per_batch = len(ddim_steps) + (d["steps"] if steps is None else steps)
        out = []
        with tqdm(total=len(batches) * per_batch, desc="RCG sampling", unit="step", disable=not progress) as bar, \
                eval_mode(self):
            for k, start in enumerate(batches, 1):
                b = min(batch_size, n - start)
                lab = None if labels is None else torch.as_tensor(labels)[start:start + b]
                t0 = time.perf_counter()
                bar.set_postfix_str(f"batch {k}/{len(batches)}: RDM")
                rep = self.sample_representations(b, rdm_steps=rdm_steps, eta=eta, labels=lab, generator=generator,
                                                  on_step=bar.update)
                t1 = time.perf_counter()
                bar.set_postfix_str(f"batch {k}/{len(batches)}: MAGE")
                codes = self.generate_tokens(rep, cfg=cfg, steps=steps, temperature=temperature, generator=generator,
                                             on_step=bar.update)
                t2 = time.perf_counter()
                out.append(self.decode_tokens(codes))
                for stage, seconds in (("rdm", t1 - t0), ("mage", t2 - t1), ("vqgan", time.perf_counter() - t2)):
                    clock[stage] = clock.get(stage, 0.0) + seconds
        return torch.cat(out)

    @torch.no_grad()
    def reconstruct(self, images: torch.Tensor, *, cfg: float | None = None, steps: int | None = None,
                    temperature: float | None = None, seed: int | None = 0) -> torch.Tensor:
        """Generate one image per input, conditioned on the input's own representation (no RDM)."""
        images = self._check_images(images)
        size = self.image_size
        if images.shape[-2:] != (size, size):
            raise ValueError(f"images must be {size}x{size} (got {tuple(images.shape[-2:])}); resize/crop first")
        with eval_mode(self):
            rep = self.encode(images)
            codes = self.generate_tokens(rep, cfg=cfg, steps=steps, temperature=temperature,
                                         generator=seeded_generator(self._model_device(), seed))
            return self.decode_tokens(codes)

    def model_card_fields(self) -> dict[str, Any]:
        fields = super().model_card_fields()
        fields["tags"] = [*fields["tags"], "unconditional-image-generation"]
        return fields
