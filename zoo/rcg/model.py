"""RCG networks as plain ``nn.Module``s: the MoCo v3 representation encoder, the representation diffusion model
(RDM: SimpleMLP + schedule + DDIM), the MaskGIT-style VQGAN tokenizer and the MAGE pixel generator.

Parameter names follow the official checkpoints so conversion is a prefix rename. See ``shared/specs/rcg.md`` for
the behaviour reproduced here, including its quirks.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import build_sincos2d_pos_embed
from timm.models.vision_transformer import Attention, Block, VisionTransformer
from torchvision.transforms.functional import normalize


# ----------------------------------------------------------------------------------- MoCo v3 ViT representation encoder
@dataclass
class EncoderConfig:
    img_size: int = 224
    patch_size: int = 16
    in_chans: int = 3
    embed_dim: int = 768
    depth: int = 12
    num_heads: int = 12
    mlp_ratio: float = 4.0
    proj_hidden_dim: int = 4096  # projector MLP width
    rep_dim: int = 256  # projector output = the representation
    drop_path_rate: float = 0.0  # MoCo v3 pretraining uses 0.1 for ViT-B/L


ENCODER_CONFIGS: dict[str, dict[str, Any]] = {
    "mocov3_vit_base": dict(embed_dim=768, depth=12, num_heads=12),
    "mocov3_vit_large": dict(embed_dim=1024, depth=24, num_heads=16),
}


def sincos_pos_embed_2d(grid_size: int, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """MoCo v3's fixed position table (1, 1 + grid^2, dim): a zero CLS slot, then per token (row-major)
    [sin(row w), cos(row w), sin(col w), cos(col w)] with w_k = temperature^(-k / (dim/4)). Built in float32."""
    if dim % 4:
        raise ValueError(f"embed_dim must be divisible by 4 for the 2D sin-cos position embedding, got {dim}")
    table = build_sincos2d_pos_embed([grid_size, grid_size], dim, temperature, interleave_sin_cos=True)
    return torch.cat([torch.zeros(1, dim), table], dim=0)[None]


def build_mlp(num_layers: int, in_dim: int, hidden_dim: int, out_dim: int) -> nn.Sequential:
    """MoCo v3 MLP: (Linear no-bias, BN, ReLU) x (n-1), Linear no-bias, BN without affine."""
    layers: list[nn.Module] = []
    for i in range(num_layers):
        d_in = in_dim if i == 0 else hidden_dim
        d_out = out_dim if i == num_layers - 1 else hidden_dim
        layers.append(nn.Linear(d_in, d_out, bias=False))
        if i < num_layers - 1:
            layers += [nn.BatchNorm1d(d_out), nn.ReLU(inplace=True)]
        else:
            layers.append(nn.BatchNorm1d(d_out, affine=False))
    return nn.Sequential(*layers)


class MocoViT(VisionTransformer):
    """timm's ViT with MoCo v3's fixed sin-cos position table and the 3-layer projector as ``head``: ``forward`` maps
    a preprocessed batch to the projector output, :meth:`represent` [0, 1] images to RCG's representation."""

    def __init__(self, config: EncoderConfig):
        c = config
        super().__init__(img_size=c.img_size, patch_size=c.patch_size, in_chans=c.in_chans, num_classes=0,
                         global_pool="token", embed_dim=c.embed_dim, depth=c.depth, num_heads=c.num_heads,
                         mlp_ratio=c.mlp_ratio, qkv_bias=True, drop_path_rate=c.drop_path_rate,
                         norm_layer=partial(nn.LayerNorm, eps=1e-6), act_layer=nn.GELU, weight_init="moco")
        self.config = config
        grid = c.img_size // c.patch_size
        with torch.no_grad():
            self.pos_embed.copy_(sincos_pos_embed_2d(grid, c.embed_dim))
            # MoCo v3 patch-embed init: xavier-uniform over the flattened patch
            val = math.sqrt(6.0 / float(3 * c.patch_size**2 + c.embed_dim))
            nn.init.uniform_(self.patch_embed.proj.weight, -val, val)
            nn.init.zeros_(self.patch_embed.proj.bias)
            nn.init.normal_(self.cls_token, std=1e-6)
        self.pos_embed.requires_grad_(False)
        self.head = build_mlp(3, c.embed_dim, c.proj_hidden_dim, c.rep_dim)

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        """[0, 1] images (B, 3, H, W) -> ImageNet-normalised, bicubic-resized to img_size (align_corners=False)."""
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"expected images of shape (B, 3, H, W) in [0, 1], got {tuple(images.shape)}")
        x = normalize(images, IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD)
        size = self.config.img_size
        if x.shape[-2:] != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bicubic", align_corners=False)
        return x

    def cls_feature(self, x: torch.Tensor) -> torch.Tensor:
        """Preprocessed images -> CLS token after the final LayerNorm (B, D)."""
        return self.forward_features(x)[:, 0]

    @torch.no_grad()
    def represent(self, images: torch.Tensor) -> torch.Tensor:
        """[0, 1] images -> standardised representation (B, rep_dim); BatchNorm must be in eval mode."""
        rep = self(self.preprocess(images))
        return (rep - rep.mean(dim=-1, keepdim=True)) / rep.std(dim=-1, keepdim=True)  # unbiased std, no epsilon


# -------------------------------- RDM: SimpleMLP denoiser, diffusion schedule, DDIM sampler (its EMA: zoo.training.EMA)
@dataclass
class RDMConfig:
    in_channels: int = 256  # = representation dim
    time_embed_dim: int = 256
    model_channels: int = 1536
    bottleneck_channels: int = 1536
    num_res_blocks: int = 12
    dropout: float = 0.0
    use_context: bool = False  # class-conditional variant
    context_channels: int = 512
    n_classes: int = 1  # ClassEmbedder rows; unconditional models have 1 (label 0)
    timesteps: int = 1000
    linear_start: float = 0.0015
    linear_end: float = 0.0195


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embedding of raw integer timesteps (B,) -> (B, dim), cos first."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


class ResBlock(nn.Module):
    def __init__(self, channels: int, emb_channels: int, bottleneck: int, dropout: float, context_channels: int | None):
        super().__init__()
        self.in_layers = nn.Sequential(nn.LayerNorm(channels), nn.SiLU(), nn.Linear(channels, bottleneck))
        self.emb_layers = nn.Sequential(nn.SiLU(), nn.Linear(emb_channels, bottleneck))
        self.context_layers = (nn.Sequential(nn.SiLU(), nn.Linear(context_channels, bottleneck))
                               if context_channels else None)
        self.out_layers = nn.Sequential(nn.LayerNorm(bottleneck), nn.SiLU(), nn.Dropout(dropout),
                                        nn.Linear(bottleneck, channels))
        nn.init.zeros_(self.out_layers[3].weight)
        nn.init.zeros_(self.out_layers[3].bias)

    def forward(self, x: torch.Tensor, emb: torch.Tensor, context: torch.Tensor | None) -> torch.Tensor:
        h = self.in_layers(x) + self.emb_layers(emb)  # (B, M)
        if self.context_layers is not None:
            h = h + self.context_layers(context)
        return x + self.out_layers(h)


class SimpleMLP(nn.Module):
    """The RDM denoiser: a residual MLP over the representation, predicting x0."""

    def __init__(self, config: RDMConfig):
        super().__init__()
        c = config
        self.model_channels = c.model_channels
        self.time_embed = nn.Sequential(nn.Linear(c.model_channels, c.time_embed_dim), nn.SiLU(),
                                        nn.Linear(c.time_embed_dim, c.time_embed_dim))
        self.input_proj = nn.Linear(c.in_channels, c.model_channels)
        ctx = c.context_channels if c.use_context else None
        self.res_blocks = nn.ModuleList(
            ResBlock(c.model_channels, c.time_embed_dim, c.bottleneck_channels, c.dropout, ctx)
            for _ in range(c.num_res_blocks)
        )
        self.out = nn.Sequential(nn.LayerNorm(c.model_channels, eps=1e-6), nn.SiLU(), nn.Linear(c.model_channels, c.in_channels))
        nn.init.zeros_(self.out[2].weight)
        nn.init.zeros_(self.out[2].bias)

    def forward(self, x: torch.Tensor, t: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, C), raw integer timesteps t (B,), context (B, ctx) -> x0 prediction (B, C)."""
        emb = self.time_embed(timestep_embedding(t, self.model_channels).to(x.dtype))  # (B, T)
        h = self.input_proj(x)  # (B, Cm)
        for block in self.res_blocks:
            h = block(h, emb, context)
        return self.out(h)


class DiffusionSchedule(nn.Module):
    """The "linear" (in sqrt space) beta schedule, computed in float64 and kept in float32.

    The buffers are derived from the config, so they are not saved; they also stay float32 when the model is
    cast to half precision (bf16 cannot resolve 1 - alphas_cumprod near t = 0)."""

    def __init__(self, timesteps: int, linear_start: float, linear_end: float):
        super().__init__()
        self.timesteps, self.linear_start, self.linear_end = timesteps, linear_start, linear_end
        self.reset_buffers(torch.get_default_device())

    def reset_buffers(self, device) -> None:
        betas = torch.linspace(self.linear_start**0.5, self.linear_end**0.5, self.timesteps, dtype=torch.float64) ** 2
        ac = torch.cumprod(1.0 - betas, dim=0)
        ac_prev = F.pad(ac[:-1], (1, 0), value=1.0)  # 1, then ac shifted by one step
        values = dict(betas=betas, alphas_cumprod=ac, alphas_cumprod_prev=ac_prev, sqrt_alphas_cumprod=ac.sqrt(),
                      sqrt_one_minus_alphas_cumprod=(1 - ac).sqrt(), sqrt_recip_alphas_cumprod=(1 / ac).sqrt(),
                      sqrt_recipm1_alphas_cumprod=(1 / ac - 1).sqrt())
        for name, value in values.items():
            self.register_buffer(name, value.to(device=device, dtype=torch.float32), persistent=False)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        if self.betas.dtype != torch.float32 and not self.betas.is_meta:
            self.reset_buffers(self.betas.device)
        return self

    def q_sample(self, x0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self.sqrt_alphas_cumprod[t, None] * x0 + self.sqrt_one_minus_alphas_cumprod[t, None] * noise

    def eps_from_x0(self, x_t: torch.Tensor, t: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
        return (self.sqrt_recip_alphas_cumprod[t, None] * x_t - x0) / self.sqrt_recipm1_alphas_cumprod[t, None]


class RDM(nn.Module):
    """Representation diffusion model: SimpleMLP (x0-parameterised) + class embedder + schedule."""

    def __init__(self, config: RDMConfig):
        super().__init__()
        self.config = config
        self.denoiser = SimpleMLP(config)
        self.class_embed = nn.Embedding(config.n_classes, config.context_channels)
        self.class_embed.requires_grad_(config.use_context)  # unused by unconditional models (DDP would object)
        self.schedule = DiffusionSchedule(config.timesteps, config.linear_start, config.linear_end)

    def context(self, labels: torch.Tensor) -> torch.Tensor | None:
        return self.class_embed(labels) if self.config.use_context else None

    def forward(self, x_t: torch.Tensor, t: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.denoiser(x_t, t, self.context(labels))

    def loss(self, x0: torch.Tensor, labels: torch.Tensor, generator: torch.Generator | None = None,
             t: torch.Tensor | None = None, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Plain MSE between the x0 prediction and x0 at uniform t (logvar 0, l_simple_weight 1)."""
        if t is None:
            t = torch.randint(0, self.config.timesteps, (x0.shape[0],), device=x0.device, generator=generator)
        if noise is None:
            noise = torch.randn(x0.shape, device=x0.device, dtype=x0.dtype, generator=generator)
        x_t = self.schedule.q_sample(x0, t, noise)
        return F.mse_loss(self(x_t, t, labels), x0)

    def default_labels(self, n: int, device) -> torch.Tensor:
        """Unconditional models pass label n_classes - 1 (= 0) through the embedder."""
        return torch.full((n,), self.config.n_classes - 1, dtype=torch.long, device=device)


def ddim_timesteps(num_steps: int, timesteps: int = 1000) -> torch.Tensor:
    """Official 'uniform' DDIM steps, shifted by one: range(0, T, c) + 1 with c = T // S (so S values when S
    divides T, a few more otherwise, e.g. 31 for S = 30, as in the official sampler)."""
    if not 1 <= num_steps <= timesteps:
        raise ValueError(f"rdm_steps must be in [1, {timesteps}], got {num_steps}")
    c = timesteps // num_steps
    steps = torch.arange(0, timesteps, c) + 1
    if steps[-1] >= timesteps:  # the official sampler fails with an IndexError here
        raise ValueError(f"rdm_steps={num_steps} puts the last DDIM step at t={int(steps[-1])}, past the schedule's "
                         f"{timesteps} steps (the official off-by-one); use {num_steps + 1} instead")
    return steps


def ddim_parameters(alphas_cumprod: torch.Tensor, steps: torch.Tensor, eta: float):
    """(alphas, alphas_prev, sigmas) for the DDIM steps, float32; alphas_prev[0] = alphas_cumprod[0] (quirk)."""
    ac = alphas_cumprod.detach().cpu().float()
    alphas = ac[steps]
    alphas_prev = torch.cat([ac[:1], ac[steps[:-1]]])
    a, ap = alphas.double(), alphas_prev.double()
    sigmas = eta * torch.sqrt((1 - ap) / (1 - a) * (1 - a / ap))
    return alphas, alphas_prev, sigmas.float()


@torch.no_grad()
def ddim_sample(denoiser: SimpleMLP, schedule: DiffusionSchedule, x_T: torch.Tensor, context: torch.Tensor | None,
                num_steps: int, eta: float = 1.0, generator: torch.Generator | None = None,
                on_step: Callable[[], Any] | None = None) -> torch.Tensor:
    """DDIM from x_T (B, C) with x0 predictions, in float32 whatever the weight dtype; ``on_step`` after each step."""
    steps = ddim_timesteps(num_steps, schedule.timesteps)
    alphas, alphas_prev, sigmas = ddim_parameters(schedule.alphas_cumprod, steps, eta)
    weight_dtype = denoiser.input_proj.weight.dtype
    if context is not None:
        context = context.to(weight_dtype)
    x = x_T.float()
    for i in range(len(steps) - 1, -1, -1):
        t = torch.full((x.shape[0],), int(steps[i]), dtype=torch.long, device=x.device)
        x0_hat = denoiser(x.to(weight_dtype), t, context).float()
        eps = schedule.eps_from_x0(x, t, x0_hat)
        a_t, a_prev, sigma = alphas[i], alphas_prev[i], sigmas[i]  # float32 scalars, as the official sampler
        pred_x0 = (x - (1.0 - a_t).sqrt() * eps) / a_t.sqrt()
        direction = (1.0 - a_prev - sigma**2).sqrt() * eps
        x = a_prev.sqrt() * pred_x0 + direction
        if float(sigma) > 0:
            x = x + sigma * torch.randn(x.shape, device=x.device, generator=generator)
        if on_step is not None:
            on_step()
    return x


# ---------------------------------------------------------------------------------------- MaskGIT-style VQGAN tokenizer
@dataclass
class VQGANConfig:
    ch: int = 128
    ch_mult: list[int] = field(default_factory=lambda: [1, 1, 2, 2, 4])
    num_res_blocks: int = 2
    in_channels: int = 3
    out_ch: int = 3
    z_channels: int = 256
    n_embed: int = 1024
    dropout: float = 0.0
    beta: float = 0.25  # legacy form: commitment weight 1, codebook weight beta


def _group_norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(num_groups=32, num_channels=channels, eps=1e-6, affine=True)


class VQResnetBlock(nn.Module):
    """MaskGIT residual block: conv without bias; when widths differ the 1x1 shortcut acts on h (x is dropped)."""

    def __init__(self, in_channels: int, out_channels: int, dropout: float):
        super().__init__()
        self.norm1 = _group_norm(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.norm2 = _group_norm(out_channels)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.nin_shortcut = nn.Conv2d(out_channels, out_channels, 1, bias=False) if in_channels != out_channels else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        if self.nin_shortcut is not None:
            return self.nin_shortcut(h) + h
        return x + h


def _mid(channels: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(OrderedDict(block_1=VQResnetBlock(channels, channels, dropout),
                                     block_2=VQResnetBlock(channels, channels, dropout)))


def _level(in_width: int, width: int, c: VQGANConfig) -> nn.Module:
    """One resolution level: ``block`` holds num_res_blocks residual blocks, the first from in_width to width."""
    level = nn.Module()
    level.block = nn.Sequential(*(VQResnetBlock(width if i else in_width, width, c.dropout)
                                  for i in range(c.num_res_blocks)))
    return level


class VQEncoder(nn.Module):
    def __init__(self, c: VQGANConfig):
        super().__init__()
        self.conv_in = nn.Conv2d(c.in_channels, c.ch, 3, padding=1, bias=False)
        in_mult = (1, *c.ch_mult)
        self.down = nn.ModuleList(_level(c.ch * in_mult[level], c.ch * mult, c) for level, mult in enumerate(c.ch_mult))
        top = c.ch * c.ch_mult[-1]
        self.mid = _mid(top, c.dropout)
        self.norm_out = _group_norm(top)
        self.conv_out = nn.Conv2d(top, c.z_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for level, level_module in enumerate(self.down):
            h = level_module.block(h)
            if level != len(self.down) - 1:
                h = F.avg_pool2d(h, 2, 2)
        return self.conv_out(F.silu(self.norm_out(self.mid(h))))


class VQDecoder(nn.Module):
    def __init__(self, c: VQGANConfig):
        super().__init__()
        width = c.ch * c.ch_mult[-1]
        self.conv_in = nn.Conv2d(c.z_channels, width, 3, padding=1)
        self.mid = _mid(width, c.dropout)
        up = [None] * len(c.ch_mult)
        for level in reversed(range(len(c.ch_mult))):
            up[level] = _level(width, c.ch * c.ch_mult[level], c)
            width = c.ch * c.ch_mult[level] if c.num_res_blocks else width
            if level != 0:
                up[level].upsample = nn.Sequential(OrderedDict(resize=nn.Upsample(scale_factor=2.0, mode="nearest"),
                                                               conv=nn.Conv2d(width, width, 3, padding=1)))
        self.up = nn.ModuleList(up)
        self.norm_out = _group_norm(width)
        self.conv_out = nn.Conv2d(width, c.out_ch, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.mid(self.conv_in(z))
        for level in reversed(range(len(self.up))):
            h = self.up[level].block(h)
            if level != 0:
                h = self.up[level].upsample(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class VectorQuantizer(nn.Module):
    def __init__(self, n_embed: int, dim: int, beta: float):
        super().__init__()
        self.beta = beta
        self.embedding = nn.Embedding(n_embed, dim)
        nn.init.uniform_(self.embedding.weight, -1.0 / n_embed, 1.0 / n_embed)

    def codes(self, z: torch.Tensor) -> torch.Tensor:
        """z (B, C, h, w) -> nearest code ids (B, h*w), row-major."""
        flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])  # (B*h*w, C)
        e = self.embedding.weight
        d = flat.pow(2).sum(1, keepdim=True) + e.pow(2).sum(1)[None] - 2 * flat @ e.t()
        return d.argmin(dim=1).view(z.shape[0], -1)

    def lookup(self, codes: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """codes (B, h*w) -> z_q (B, C, h, w)."""
        z = self.embedding(codes).view(codes.shape[0], grid[0], grid[1], -1)
        return z.permute(0, 3, 1, 2).contiguous()

    def forward(self, z: torch.Tensor):
        """Straight-through quantisation; returns (z_q, vq_loss, codes)."""
        codes = self.codes(z)
        z_q = self.lookup(codes, z.shape[-2:])
        loss = F.mse_loss(z_q.detach(), z) + self.beta * F.mse_loss(z_q, z.detach())  # taming's legacy form
        return z + (z_q - z).detach(), loss, codes


class VQGAN(nn.Module):
    """MaskGIT VQGAN: [0, 1] images <-> token ids. No quant_conv, no attention, no output tanh or clamp."""

    def __init__(self, config: VQGANConfig):
        super().__init__()
        self.config = config
        self.encoder = VQEncoder(config)
        self.decoder = VQDecoder(config)
        self.quantize = VectorQuantizer(config.n_embed, config.z_channels, config.beta)

    @property
    def downsample(self) -> int:
        return 2 ** (len(self.config.ch_mult) - 1)

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """[0, 1] images (B, 3, H, W) -> token ids (B, (H/f)*(W/f))."""
        return self.quantize.codes(self.encoder(images))

    def decode_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """Token ids (B, side*side) -> images (B, 3, H, W)."""
        side = math.isqrt(codes.shape[1])
        return self.decoder(self.quantize.lookup(codes, (side, side)))

    def reconstruct_latents(self, z: torch.Tensor):
        """Encoder outputs z (B, C, h, w) -> (reconstruction, vq_loss, codes), straight-through."""
        z_q, vq_loss, codes = self.quantize(z)
        return self.decoder(z_q), vq_loss, codes

    def forward(self, images: torch.Tensor):
        """Reconstruction for training: (reconstruction, vq_loss, codes)."""
        return self.reconstruct_latents(self.encoder(images))


class PatchDiscriminator(nn.Module):
    """PatchGAN critic for the tokenizer's adversarial loss (training only): one real/fake logit per overlapping
    image patch. GroupNorm rather than the usual BatchNorm, so real and reconstructed batches can pass separately
    without sharing batch statistics."""

    def __init__(self, in_channels: int = 3, channels: int = 64, num_layers: int = 3):
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(in_channels, channels, 4, stride=2, padding=1), nn.LeakyReLU(0.2)]
        width = channels
        for layer in range(1, num_layers + 1):
            out = channels * min(2**layer, 8)
            stride = 2 if layer < num_layers else 1
            layers += [nn.Conv2d(width, out, 4, stride=stride, padding=1, bias=False),
                       nn.GroupNorm(min(32, out // 4), out), nn.LeakyReLU(0.2)]
            width = out
        layers.append(nn.Conv2d(width, 1, 4, stride=1, padding=1))
        self.layers = nn.Sequential(*layers)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """[0, 1] images (B, C, H, W) -> patch logits (B, 1, h, w); 28 px and 2 layers give 5 x 5 patches."""
        return self.layers(images)


# ------------------------------------------------------------------------------------------------- MAGE pixel generator
@dataclass
class MAGEConfig:
    codebook_size: int = 1024
    num_tokens: int = 256  # 16 x 16 VQGAN tokens
    embed_dim: int = 1024
    depth: int = 24
    num_heads: int = 16
    decoder_embed_dim: int = 1024
    decoder_depth: int = 8
    decoder_num_heads: int = 16
    mlp_ratio: float = 4.0
    dropout: float = 0.1
    attn_dropout: float = 0.1
    use_rep: bool = True  # False: the unconditional MAGE baseline (slot 0 is always the fake-class token)
    rep_dim: int = 256
    rep_drop_prob: float = 0.1
    mask_ratio_min: float = 0.5
    mask_ratio_max: float = 1.0
    mask_ratio_mu: float = 0.75
    mask_ratio_std: float = 0.25
    label_smoothing: float = 0.1

    @property
    def vocab_size(self) -> int:
        return self.codebook_size + 1000 + 1

    @property
    def fake_class_id(self) -> int:
        return self.codebook_size + 76

    @property
    def mask_id(self) -> int:
        return self.vocab_size - 1


MAGE_CONFIGS: dict[str, dict[str, Any]] = {
    "mage_vit_base_patch16": dict(embed_dim=768, depth=12, num_heads=12, decoder_embed_dim=768, decoder_depth=8,
                                  decoder_num_heads=16),
    "mage_vit_large_patch16": dict(embed_dim=1024, depth=24, num_heads=16, decoder_embed_dim=1024, decoder_depth=8,
                                   decoder_num_heads=16),
}


class Float32LogitsAttention(Attention):
    """MAGE attention: q.k logits and softmax in float32 even under autocast (half precision would overflow)."""

    def forward(self, x: torch.Tensor, attn_mask=None, is_causal: bool = False) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, H, N, hd)
        with torch.autocast(device_type=x.device.type, enabled=False):
            attn = (q.float() @ k.float().transpose(-2, -1)) * self.scale
            attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn).to(v.dtype)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


def _mage_block(dim: int, heads: int, c: MAGEConfig) -> Block:
    return Block(dim, heads, mlp_ratio=c.mlp_ratio, qkv_bias=True, proj_drop=c.dropout, attn_drop=c.attn_dropout,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6), act_layer=nn.GELU, attn_layer=Float32LogitsAttention)


class TokenEmbedding(nn.Module):
    """BERT-style embedding: LayerNorm(word[ids] + position), then dropout."""

    def __init__(self, vocab_size: int, seq_len: int, dim: int, dropout: float):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, dim)
        self.position_embeddings = nn.Embedding(seq_len, dim)
        self.LayerNorm = nn.LayerNorm(dim, eps=1e-6)
        self.dropout = nn.Dropout(dropout)
        nn.init.normal_(self.word_embeddings.weight, std=0.02)
        nn.init.normal_(self.position_embeddings.weight, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.word_embeddings(ids) + self.position_embeddings.weight[None, : ids.shape[1]]
        return self.dropout(self.LayerNorm(x))


class MlmLayer(nn.Module):
    """Tied output head: logits = GELU-LN(fc(h)) @ word_embeddings^T + bias."""

    def __init__(self, in_dim: int, dim: int, vocab_size: int):
        super().__init__()
        self.fc = nn.Linear(in_dim, dim)
        self.gelu = nn.GELU()
        self.ln = nn.LayerNorm(dim)
        self.bias = nn.Parameter(torch.zeros(1, 1, vocab_size))

    def forward(self, x: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return self.ln(self.gelu(self.fc(x))) @ word_embeddings.t() + self.bias


class MAGE(nn.Module):
    """Masked generative encoder over VQGAN tokens, with slot 0 carrying the (projected) representation."""

    def __init__(self, config: MAGEConfig):
        super().__init__()
        c = self.config = config
        seq_len = c.num_tokens + 1
        self.token_emb = TokenEmbedding(c.vocab_size, seq_len, c.embed_dim, c.dropout)
        if c.use_rep:
            self.latent_prior_proj = nn.Linear(c.rep_dim, c.embed_dim)
            self.fake_latent = nn.Parameter(torch.randn(1, c.rep_dim) * 0.02)
        self.blocks = nn.Sequential(*(_mage_block(c.embed_dim, c.num_heads, c) for _ in range(c.depth)))
        self.norm = nn.LayerNorm(c.embed_dim, eps=1e-6)
        self.decoder_embed = nn.Linear(c.embed_dim, c.decoder_embed_dim)
        self.decoder_pos_embed_learned = nn.Parameter(torch.randn(1, seq_len, c.decoder_embed_dim) * 0.02)
        self.decoder_blocks = nn.Sequential(*(_mage_block(c.decoder_embed_dim, c.decoder_num_heads, c)
                                              for _ in range(c.decoder_depth)))
        self.decoder_norm = nn.LayerNorm(c.decoder_embed_dim, eps=1e-6)
        self.mlm_layer = MlmLayer(c.decoder_embed_dim, c.embed_dim, c.vocab_size)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    # ---------------------------------------------------------------------------------------------------- forward
    def forward(self, codes: torch.Tensor, rep: torch.Tensor | None, drop_mask: torch.Tensor,
                all_mask: torch.Tensor) -> torch.Tensor:
        """Logits (B, 1 + N, vocab).

        codes (B, N) token ids; rep (B, rep_dim) or None (unconditional model); drop_mask / all_mask (B, N) bool:
        positions removed from the encoder / positions whose token is hidden (drop is a subset of all)."""
        c = self.config
        B = codes.shape[0]
        ids = torch.where(all_mask, torch.full_like(codes, c.mask_id), codes)
        ids = torch.cat([torch.full_like(codes[:, :1], c.fake_class_id), ids], dim=1)  # (B, 1+N)
        zero = torch.zeros_like(drop_mask[:, :1])
        drop_mask = torch.cat([zero, drop_mask], dim=1)
        all_mask = torch.cat([zero, all_mask], dim=1)

        x = self.token_emb(ids)  # (B, 1+N, D)
        if c.use_rep:
            x = torch.cat([self.latent_prior_proj(rep.to(x.dtype))[:, None], x[:, 1:]], dim=1)
        kept = x[~drop_mask].reshape(B, -1, x.shape[-1])  # (B, 1+N-n_drop, D), order preserved
        kept = self.decoder_embed(self.norm(self.blocks(kept)))  # (B, K, Dd)

        # every dropped or masked position is padded with the slot-0 vector
        slot0 = kept[:, :1].expand(B, ids.shape[1], kept.shape[-1])
        h = slot0.clone()
        h[~drop_mask] = kept.reshape(-1, kept.shape[-1])
        h = torch.where(all_mask[..., None], slot0, h)
        h = self.decoder_norm(self.decoder_blocks(h + self.decoder_pos_embed_learned))
        return self.mlm_layer(h, self.token_emb.word_embeddings.weight.detach())

    # --------------------------------------------------------------------------------------------------- training
    def sample_masks(self, batch: int, device, generator: torch.Generator | None = None):
        """Random (drop_mask, all_mask) (B, N): one truncated-normal mask ratio per batch, per-sample order."""
        c, n = self.config, self.config.num_tokens
        lo, hi = (c.mask_ratio_min - c.mask_ratio_mu) / c.mask_ratio_std, (c.mask_ratio_max - c.mask_ratio_mu) / c.mask_ratio_std
        z = torch.empty(1, device=generator.device if generator is not None else "cpu")
        nn.init.trunc_normal_(z, mean=0.0, std=1.0, a=lo, b=hi, generator=generator)
        ratio = c.mask_ratio_mu + c.mask_ratio_std * float(z)
        n_mask = math.ceil(n * ratio)
        n_drop = math.ceil(n * c.mask_ratio_min)
        noise = torch.rand(batch, n, device=device, generator=generator)
        order = noise.argsort(dim=1).argsort(dim=1)  # rank of each position's noise
        return order < n_drop, order < n_mask

    def loss(self, codes: torch.Tensor, logits: torch.Tensor, all_mask: torch.Tensor) -> torch.Tensor:
        """Label-smoothed cross entropy over the codebook, averaged over masked positions."""
        logp = F.log_softmax(logits[:, 1:, : self.config.codebook_size].float(), dim=-1)  # (B, N, K)
        nll = -logp.gather(-1, codes[..., None]).squeeze(-1)
        smooth = -logp.mean(dim=-1)
        eps = self.config.label_smoothing
        per_token = (1 - eps) * nll + eps * smooth
        mask = all_mask.float()
        return (per_token * mask).sum() / mask.sum()

    def training_rep(self, rep: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Replace each sample's representation by the fake latent with probability rep_drop_prob."""
        drop = torch.rand(rep.shape[0], device=rep.device, generator=generator) < self.config.rep_drop_prob
        return torch.where(drop[:, None], self.fake_latent.to(rep.dtype).expand_as(rep), rep)

    # ------------------------------------------------------------------------------------------------- generation
    @torch.no_grad()
    def generate(self, rep: torch.Tensor | None, num_iter: int = 20, temperature: float = 6.0, cfg: float = 0.0,
                 generator: torch.Generator | None = None, batch: int | None = None,
                 on_step: Callable[[], Any] | None = None) -> torch.Tensor:
        """Iterative decoding -> token ids (B, N). rep (B, rep_dim) or None for the unconditional model.
        ``on_step`` is called after each of the ``num_iter`` iterations (a progress bar's update)."""
        c, n = self.config, self.config.num_tokens
        device = self.decoder_pos_embed_learned.device if rep is None else rep.device
        if rep is not None:
            batch = rep.shape[0]
        elif batch is None:
            raise ValueError("without representations give the number of images: batch=n")
        if cfg > 0 and not c.use_rep:
            raise ValueError("classifier-free guidance needs a representation-conditioned MAGE (use_rep=True)")
        ids = torch.full((batch, n), c.mask_id, dtype=torch.long, device=device)
        no_drop = torch.zeros(batch, n, dtype=torch.bool, device=device)
        sampled = ids
        for step in range(num_iter):
            unknown = ids == c.mask_id
            if cfg > 0:
                uncond = self.fake_latent.to(rep.dtype).expand_as(rep)
                logits = self(torch.cat([ids, ids]), torch.cat([rep, uncond]), torch.cat([no_drop, no_drop]),
                              torch.cat([unknown, unknown]))[:, 1:, : c.codebook_size].float()
                cond, unc = logits[:batch], logits[batch:]
                w = cfg * (step + 1) / num_iter  # linearly ramped guidance
                logits = cond - w * (unc - cond)
            else:
                logits = self(ids, rep, no_drop, unknown)[:, 1:, : c.codebook_size].float()
            probs = logits.softmax(dim=-1)  # (B, N, K)
            sampled = torch.multinomial(probs.view(-1, c.codebook_size), 1, generator=generator).view(batch, n)
            sampled = torch.where(unknown, sampled, ids)
            ratio = (step + 1) / num_iter
            mask_len = math.floor(n * math.cos(math.pi / 2 * ratio))
            mask_len = max(1, min(int(unknown[0].sum()) - 1, mask_len))
            chosen = probs.gather(-1, sampled[..., None]).squeeze(-1)
            uniform = torch.rand(chosen.shape, device=device, generator=generator).clamp_min(1e-20)
            gumbel = -torch.log(-torch.log(uniform))
            confidence = torch.log(chosen) + temperature * (1 - ratio) * gumbel
            confidence = torch.where(unknown, confidence, torch.full_like(confidence, math.inf))
            cut_off = confidence.sort(dim=-1).values[:, mask_len - 1 : mask_len]
            ids = torch.where(confidence <= cut_off, torch.full_like(sampled, c.mask_id), sampled)
            if on_step is not None:
                on_step()
        return sampled
