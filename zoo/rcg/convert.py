"""Official RCG / MAGE / MoCo v3 checkpoints -> zoo repos (``config.json`` + ``model.safetensors``).

Official files are pickles holding an ``argparse.Namespace``; they are read with ``torch.load(weights_only=True)``
and exactly that class allow-listed, never unpickled freely. Every official key is either mapped to a zoo key or on
an explicit list of known-unused keys; anything else is an error, and the zoo module is then loaded strictly.

    zoo convert rcg vit-b-300ep.pth.tar --out mocov3-vit-b        # MoCo v3 -> rcg-mocov3
    zoo convert rcg mage.pth --out mage-b                          # MAGE -> rcg-mage (with encoder + VQGAN)
    zoo convert rcg rdm.pth --out rdm-b                            # RDM -> rcg-rdm (raw + EMA weights)
    zoo convert rcg vqgan_jax_strongaug.ckpt --out vqgan           # VQGAN -> rcg-vqgan
    zoo convert rcg mage.pth rdm.pth --out rcg-b                   # MAGE + RDM -> rcg-pipeline (EMA RDM weights)
"""

from __future__ import annotations

import argparse
import math
import os
import warnings
from pathlib import Path
from typing import Any

import torch

from zoo.convert import map_keys, safe_torch_load
from zoo.io import release_pages, releasing_pages
from zoo.rcg.model import (ENCODER_CONFIGS, MAGE_CONFIGS, DiffusionSchedule, EncoderConfig, MAGEConfig, RDMConfig,
                           VQGANConfig)
from zoo.registry import resolve_module_class

__all__ = ["load_official", "convert_checkpoint", "convert_files", "from_upstream", "ALLOWED_GLOBALS"]

ALLOWED_GLOBALS = [argparse.Namespace]  # the only non-tensor class the official files contain

# MoCo v3 ViT-L file naming bug (fixed by RCG's loader)
VIT_L_RENAMES = {
    "blocks.13.norm13.": "blocks.13.norm1.",
    "blocks.13.mlp.fc13.": "blocks.13.mlp.fc1.",
    "blocks.14.norm14.": "blocks.14.norm2.",
    "blocks.14.mlp.fc14.": "blocks.14.mlp.fc2.",
}
DENOISER = "model.diffusion_model."
EMA_BOOKKEEPING = ("model_ema.decay", "model_ema.num_updates")
SCHEDULE_KEYS = ("betas", "alphas_cumprod", "alphas_cumprod_prev", "sqrt_alphas_cumprod",
                 "sqrt_one_minus_alphas_cumprod", "log_one_minus_alphas_cumprod", "sqrt_recip_alphas_cumprod",
                 "sqrt_recipm1_alphas_cumprod", "posterior_variance", "posterior_log_variance_clipped",
                 "posterior_mean_coef1", "posterior_mean_coef2")
# present in MAGE checkpoints, unused in its forward pass
MAGE_UNUSED = ("pos_embed", "decoder_pos_embed", "cls_token", "mask_token", "patch_embed.proj.weight",
               "patch_embed.proj.bias", "decoder_pred.weight", "decoder_pred.bias", "token_emb.position_ids")
# Head counts are not in the weights; the official files name their model instead. MoCo v3's `arch` field and
# the RDM config path (config/rdm/mocov3vit{b,l}_simplemlp_l12_w1536[_classcond].yaml) -> ENCODER_CONFIGS names.
MOCO_ARCHS = {"vit_base": "mocov3_vit_base", "vit_large": "mocov3_vit_large"}
RDM_CONFIG_ENCODERS = {"mocov3vitb": "mocov3_vit_base", "mocov3vitl": "mocov3_vit_large"}


# ----------------------------------------------------------------------------------------------------- loading
def load_official(path: str | os.PathLike) -> dict[str, Any]:
    """Read an official checkpoint with ``weights_only=True``, allowing argparse.Namespace only."""
    ckpt = safe_torch_load(path, ALLOWED_GLOBALS, what="an official RCG, MAGE or MoCo v3 checkpoint")
    if not isinstance(ckpt, dict):
        raise ValueError(f"{path}: expected a dict checkpoint, got {type(ckpt).__name__}")
    return ckpt


def _state_dict(ckpt: dict[str, Any]) -> dict[str, torch.Tensor]:
    for key in ("state_dict", "model"):
        if isinstance(ckpt.get(key), dict):
            return ckpt[key]
    if ckpt and all(isinstance(v, torch.Tensor) for v in ckpt.values()):
        return ckpt  # a bare state dict
    raise ValueError(f"no state dict found (top-level keys: {sorted(ckpt)[:10]})")


def detect_kind(ckpt: dict[str, Any]) -> str:
    """'moco', 'rdm', 'mage' or 'vqgan' from the keys of an official checkpoint."""
    sd = _state_dict(ckpt)
    if any(k.startswith("module.base_encoder.") for k in sd):
        return "moco"
    if any(k.startswith("model.diffusion_model.") for k in sd):
        return "rdm"
    if "token_emb.word_embeddings.weight" in sd:
        return "mage"
    if "quantize.embedding.weight" in sd and any(k.startswith("decoder.") for k in sd):
        return "vqgan"
    raise ValueError(f"unrecognised checkpoint: keys start {sorted(sd)[:5]}; expected MoCo v3, RDM, MAGE or VQGAN")


def _count(sd: dict[str, torch.Tensor], prefix: str) -> int:
    return len({k[len(prefix):].split(".")[0] for k in sd if k.startswith(prefix)})


# -------------------------------------------------------------------------------------------- config inference
def _with_heads(cfg: dict[str, Any], overrides: dict | None, widths: dict[str, int], what: str,
                table: dict[str, dict[str, Any]], name: str | None, source: str) -> dict[str, Any]:
    """``cfg`` with its head counts (``widths``: each key and the width it divides) and then ``overrides`` applied.

    A head count comes from the config (``--config``) or from the official model the checkpoint's ``source`` names
    (whose other entries must fit the weights); it is never guessed from the width (MoCo v3's ViT-S has 12 heads
    at width 384, timm's 6)."""
    overrides = dict(overrides or {})
    named = table.get(name or "", {})
    wrong = {k: (want, cfg[k]) for k, want in named.items() if k not in widths and cfg[k] != want}
    if wrong:
        raise ValueError(f"the checkpoint's {source} names the {what} {name!r}, but its weights do not fit it: "
                         + ", ".join(f"{k} {want} expected, {got} found" for k, (want, got) in wrong.items()))
    for key, width in widths.items():
        given, known = overrides.pop(key, None), named.get(key)
        if given is not None:
            if known is not None and int(given) != known:
                raise ValueError(f"the config sets {what}.{key}={given}, but the checkpoint's {source} names "
                                 f"{name!r}, which has {known}")
            if int(given) < 1 or width % int(given):
                raise ValueError(f"the config sets {what}.{key}={given}, which does not divide the width {width}")
            cfg[key] = int(given)
        elif known is not None:
            cfg[key] = int(known)
        else:
            why = (f"its {source} names {name!r}, which is not an official model" if name
                   else f"it has no {source} naming its model")
            official = "; ".join(f"{model}: {key} {config[key]}" for model, config in table.items())
            raise ValueError(
                f"the {what}'s {key} (width {width}) is not stored in the weights and {why}; pass it, e.g. "
                f"--config '{{\"{what}\": {{\"{key}\": N}}}}' (official: {official})")
    return {**cfg, **overrides}


def infer_encoder_config(sd: dict[str, torch.Tensor], overrides: dict | None = None, arch: str | None = None,
                         source: str = "arch") -> dict:
    """MoCo v3 ViT config from the weights; heads from ``overrides`` or the official ``arch`` (ENCODER_CONFIGS name)
    that the checkpoint's ``source`` names."""
    dim = sd["pos_embed"].shape[-1]
    patch = sd["patch_embed.proj.weight"].shape[-1]
    grid = math.isqrt(sd["pos_embed"].shape[1] - 1)
    cfg = dict(
        img_size=grid * patch, patch_size=patch, in_chans=sd["patch_embed.proj.weight"].shape[1], embed_dim=dim,
        depth=_count(sd, "blocks."), mlp_ratio=sd["blocks.0.mlp.fc1.weight"].shape[0] / dim,
        proj_hidden_dim=sd["head.0.weight"].shape[0], rep_dim=sd["head.6.weight"].shape[0])
    cfg = _with_heads(cfg, overrides, {"num_heads": dim}, "encoder", ENCODER_CONFIGS, arch, source)
    return EncoderConfig(**cfg).__dict__


def infer_rdm_config(sd: dict[str, torch.Tensor], overrides: dict | None = None) -> dict:
    cfg = dict(
        in_channels=sd["input_proj.weight"].shape[1], model_channels=sd["input_proj.weight"].shape[0],
        time_embed_dim=sd["time_embed.0.weight"].shape[0], bottleneck_channels=sd["res_blocks.0.in_layers.2.weight"].shape[0],
        num_res_blocks=_count(sd, "res_blocks."), use_context="res_blocks.0.context_layers.1.weight" in sd)
    return RDMConfig(**{**cfg, **(overrides or {})}).__dict__


def infer_vqgan_config(sd: dict[str, torch.Tensor], overrides: dict | None = None) -> dict:
    ch = sd["encoder.conv_in.weight"].shape[0]
    levels = 1 + sum(1 for k in sd if k.startswith("decoder.up.") and k.endswith("upsample.conv.weight"))
    num_res_blocks = _count(sd, "encoder.down.0.block.")
    if num_res_blocks:
        ch_mult = [sd[f"encoder.down.{i}.block.0.conv1.weight"].shape[0] // ch for i in range(levels)]
    else:  # without residual blocks no level changes width
        ch_mult = [sd["encoder.mid.block_1.conv1.weight"].shape[0] // ch] * levels
    cfg = dict(ch=ch, ch_mult=ch_mult, num_res_blocks=num_res_blocks, in_channels=sd["encoder.conv_in.weight"].shape[1],
               out_ch=sd["decoder.conv_out.weight"].shape[0], z_channels=sd["quantize.embedding.weight"].shape[1],
               n_embed=sd["quantize.embedding.weight"].shape[0])
    return VQGANConfig(**{**cfg, **(overrides or {})}).__dict__


def infer_mage_config(sd: dict[str, torch.Tensor], overrides: dict | None = None, model: str | None = None) -> dict:
    """MAGE config from the weights; head counts from ``overrides`` or the official ``model`` (``args.model``)."""
    dim = sd["token_emb.word_embeddings.weight"].shape[1]
    dec = sd["decoder_embed.weight"].shape[0]
    cfg = dict(
        codebook_size=sd["token_emb.word_embeddings.weight"].shape[0] - 1001,
        num_tokens=sd["token_emb.position_embeddings.weight"].shape[0] - 1, embed_dim=dim, depth=_count(sd, "blocks."),
        decoder_embed_dim=dec, decoder_depth=_count(sd, "decoder_blocks."),
        mlp_ratio=sd["blocks.0.mlp.fc1.weight"].shape[0] / dim, use_rep="fake_latent" in sd)
    if cfg["use_rep"]:
        cfg["rep_dim"] = sd["fake_latent"].shape[1]
    widths = {"num_heads": dim, "decoder_num_heads": dec}
    return MAGEConfig(**_with_heads(cfg, overrides, widths, "mage", MAGE_CONFIGS, model, "args.model")).__dict__


# -------------------------------------------------------------------------------------------------- conversions
def _part(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The entries under ``prefix``, keyed without it."""
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def _encoder_rules(prefix: str, target: str | None) -> list[tuple[str, str | None]]:
    """:func:`zoo.convert.map_keys` rules for a MoCo v3 ViT under ``prefix``: to ``target`` (None: dropped), the
    ViT-L file's misnamed keys fixed as RCG's loader does."""
    if target is None:
        return [(prefix, None)]
    return [*((prefix + bad, target + good) for bad, good in VIT_L_RENAMES.items()), (prefix, target)]


def _build(model_type: str, hparams: dict[str, Any], state: dict[str, torch.Tensor]):
    cls = resolve_module_class(model_type)  # by name: load_official alone imports no Lightning
    return cls.from_state_dict(hparams, {k: v.contiguous() for k, v in state.items()})


def convert_moco(ckpt: dict[str, Any], config: dict | None = None):
    config = config or {}
    rules = [*_encoder_rules("module.base_encoder.", "encoder."),
             *_encoder_rules("module.momentum_encoder.", "momentum_encoder."), ("module.predictor.", "predictor.")]
    state = map_keys(_state_dict(ckpt), rules, what="the MoCo v3 checkpoint")
    arch = MOCO_ARCHS.get(ckpt.get("arch"), ckpt.get("arch"))
    enc = infer_encoder_config(_part(state, "encoder."), config.get("encoder"), arch, "arch field")
    hparams = dict(encoder=enc, predictor_hidden_dim=state["predictor.0.weight"].shape[0], **config.get("module", {}))
    return _build("rcg-mocov3", hparams, state)


def convert_vqgan(ckpt: dict[str, Any], config: dict | None = None):
    sd = _state_dict(ckpt)
    hparams = dict(vqgan=infer_vqgan_config(sd, (config or {}).get("vqgan")))
    return _build("rcg-vqgan", hparams, map_keys(sd, [("", "vqgan.")]))


def _rdm(ckpt: dict[str, Any], config: dict, *, raw: str | None, ema: str, encoder: str | None):
    """(rdm config, state) of an RDM checkpoint: its denoiser under ``raw`` (None: dropped), the denoiser's EMA under
    ``ema``, the encoder it was trained on under ``encoder``; the EMA bookkeeping and the schedule are left out."""
    sd = _state_dict(ckpt)
    denoiser = _part(sd, DENOISER)
    emb = sd["cond_stage_model.embedding.weight"]
    rdm_cfg = infer_rdm_config(denoiser, {"n_classes": emb.shape[0], "context_channels": emb.shape[1],
                                          **(config.get("rdm") or {})})
    _check_schedule(sd, rdm_cfg)
    # the EMA names each denoiser parameter with its dots dropped
    ema_rules = {"model_ema." + ("diffusion_model." + name).replace(".", ""): ema + name for name in denoiser}
    rules = [(DENOISER, raw), ("cond_stage_model.embedding.weight", "rdm.class_embed.weight"), *ema_rules.items(),
             *((key, None) for key in (*EMA_BOOKKEEPING, *SCHEDULE_KEYS)),
             *_encoder_rules("pretrained_encoder.", encoder)]
    return rdm_cfg, map_keys(sd, rules, expected=ema_rules.values(), what="the RDM checkpoint")


def _check_schedule(sd: dict[str, torch.Tensor], rdm_cfg: dict) -> None:
    ours = DiffusionSchedule(rdm_cfg["timesteps"], rdm_cfg["linear_start"], rdm_cfg["linear_end"])
    for name in SCHEDULE_KEYS:
        mine = getattr(ours, name, None)
        if name in sd and mine is not None and not torch.allclose(mine, sd[name].float(), rtol=1e-5, atol=1e-7):
            raise ValueError(f"RDM: schedule buffer {name!r} differs from the configured linear schedule "
                             f"({rdm_cfg['linear_start']}..{rdm_cfg['linear_end']}); set rdm.linear_start/end")


def _rdm_encoder_arch(args) -> str | None:
    """The encoder an official RDM config path names (``config/rdm/mocov3vitl_...yaml`` -> mocov3_vit_large); else the
    file name itself, so an error can quote it."""
    path = getattr(args, "config", None)
    if not path:
        return None
    stem = Path(str(path)).name
    return next((arch for prefix, arch in RDM_CONFIG_ENCODERS.items() if stem.startswith(prefix + "_")), stem)


def convert_rdm(ckpt: dict[str, Any], config: dict | None = None):
    config = config or {}
    sd = _state_dict(ckpt)
    rdm_cfg, state = _rdm(ckpt, config, raw="rdm.denoiser.", ema="ema.shadow.", encoder="encoder.")
    encoder, arch = _part(state, "encoder."), _rdm_encoder_arch(ckpt.get("args"))
    enc_cfg = infer_encoder_config(encoder, config.get("encoder"), arch, "args.config") if encoder else None
    hparams = dict(rdm=rdm_cfg, encoder=enc_cfg, **config.get("module", {}))
    if "model_ema.decay" in sd:
        hparams["ema_decay"] = float(sd["model_ema.decay"])
    state["ema.num_updates"] = sd.get("model_ema.num_updates", torch.tensor(0)).long().reshape(())
    return _build("rcg-rdm", hparams, state)


def _mage(ckpt: dict[str, Any], config: dict):
    """(mage, vqgan and encoder configs, state) of a MAGE checkpoint."""
    rules = [*_encoder_rules("pretrained_encoder.", "encoder."), ("vqgan.", "vqgan."),
             *((key, None) for key in MAGE_UNUSED), ("", "mage.")]
    state = map_keys(_state_dict(ckpt), rules, what="the MAGE checkpoint")
    args = ckpt.get("args")
    mage_cfg = infer_mage_config(_part(state, "mage."), config.get("mage"), getattr(args, "model", None))
    encoder, enc_arch = _part(state, "encoder."), getattr(args, "pretrained_enc_arch", None)
    enc_cfg = infer_encoder_config(encoder, config.get("encoder"), enc_arch, "args.pretrained_enc_arch") if encoder else None
    vq_cfg = infer_vqgan_config(_part(state, "vqgan."), config.get("vqgan"))
    return dict(mage=mage_cfg, vqgan=vq_cfg, encoder=enc_cfg), state


def convert_mage(ckpt: dict[str, Any], config: dict | None = None):
    config = config or {}
    configs, state = _mage(ckpt, config)
    return _build("rcg-mage", {**configs, **config.get("module", {})}, state)


def convert_pipeline(mage_ckpt: dict[str, Any], rdm_ckpt: dict[str, Any], config: dict | None = None):
    """MAGE checkpoint (with encoder + VQGAN) + RDM checkpoint -> RCGPipeline using the RDM's EMA weights."""
    config = config or {}
    configs, state = _mage(mage_ckpt, config)
    if configs["encoder"] is None:
        raise ValueError("the MAGE checkpoint has no pretrained_encoder: it is not representation-conditioned")
    rdm_cfg, rdm_state = _rdm(rdm_ckpt, config, raw=None, ema="rdm.denoiser.", encoder=None)
    rdm_encoder = _part(_state_dict(rdm_ckpt), "pretrained_encoder.")
    if rdm_encoder:
        encoder = _part(_state_dict(mage_ckpt), "pretrained_encoder.")
        if set(rdm_encoder) != set(encoder) or any(not _equal_released(rdm_encoder[k], encoder[k]) for k in encoder):
            warnings.warn("the RDM was trained on a different encoder copy than the MAGE's; the pipeline encodes "
                          "images with the MAGE's encoder", stacklevel=2)
    grid = math.isqrt(configs["mage"]["num_tokens"])
    image_size = config.get("image_size", grid * 2 ** (len(configs["vqgan"]["ch_mult"]) - 1))
    hparams = dict(configs, rdm=rdm_cfg, image_size=image_size, sampling=config.get("sampling") or None)
    return _build("rcg-pipeline", hparams, {**state, **rdm_state})


def _equal_released(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``torch.equal``, then both tensors' pages released (two multi-GB encoder copies are compared in passing)."""
    same = torch.equal(a, b)
    release_pages(a)
    release_pages(b)
    return same


def convert_checkpoint(paths: list[str | os.PathLike], config: dict | None = None):
    """One official file -> its stage module; a MAGE file + an RDM file -> the pipeline."""
    ckpts = [load_official(p) for p in paths]
    kinds = [detect_kind(c) for c in ckpts]
    if len(ckpts) == 1:
        return {"moco": convert_moco, "rdm": convert_rdm, "mage": convert_mage, "vqgan": convert_vqgan}[kinds[0]](
            ckpts[0], config)
    if sorted(kinds) == ["mage", "rdm"]:
        mage, rdm = (ckpts[0], ckpts[1]) if kinds[0] == "mage" else (ckpts[1], ckpts[0])
        return convert_pipeline(mage, rdm, config)
    raise ValueError(f"give one checkpoint, or a MAGE and an RDM checkpoint for a pipeline; got kinds {kinds}")


def convert_files(paths: list[str | os.PathLike], out_dir: str | os.PathLike, config: dict | None = None):
    """Convert and write a zoo repo folder; returns the module."""
    module = convert_checkpoint(paths, config)
    with releasing_pages():  # each tensor leaves memory once written: peak ~ one tensor, not the checkpoints
        module.save_pretrained(out_dir)
    return module


def from_upstream(files: dict[str, Path], out_dir: Path, entry) -> None:
    """Catalog converter: the entry's official files (MAGE + RDM) -> an RCGPipeline repo in ``out_dir``."""
    config = dict(entry.convert_args)
    config["sampling"] = {k: v for k, v in (entry.defaults or {}).items() if k != "batch_size"}
    convert_files(list(files.values()), out_dir, config)
