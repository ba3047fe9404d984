"""Full-size official-format checkpoints with random weights, for conversion and speed tests at real size.

Every file has the keys, shapes, dtypes and container of the authors' release, as the specs in
``shared/specs/*.md`` describe them (section numbers below); only the values are random (seeded). Each generator
also runs at the tiny sizes of ``tests/fixtures/``, and ``tests/core/test_real_size.py`` checks that it then
reproduces the fixture files' layout exactly (same keys, shapes, dtypes, container), which is what ties the
full-size layouts to the official ones. Files go wherever the caller says (a scratch folder, never the repo).

    python benchmarks/_official_files.py /tmp/official rcg chess bitdelta escaip   # write them all (~10 GB)

Sizes (spec figures): MAGE-L ``.pth`` 3.15 GB and RDM-L ``.pth`` 1.80 GB (fp32, with the MoCo v3 ViT-L encoder
inside each); ``270M.zip`` 1.08 GB, ``136M.zip`` 0.55 GB, ``9M.zip`` 36 MB (fp32 zarr, zstd); a Mistral-7B
``diff.pt`` 1.40 GB; an EScAIP H1024L8 inference checkpoint 2.17 GB (weights + EMA weights, fp32).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------------------------------------ random values
def _random(name: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """A plausible random value for a parameter called ``name``: norms near 1, positive variances, small weights
    (so a forward pass stays finite and every weight matters)."""
    if not dtype.is_floating_point:
        if name.endswith("position_ids"):
            return torch.arange(shape[-1], dtype=dtype).reshape(shape)
        return torch.zeros(shape, dtype=dtype)
    leaf = name.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
    x = torch.randn(shape, generator=gen, dtype=torch.float32)
    if leaf in ("running_var",):
        x = 1.0 + x.abs()
    elif len(shape) == 1 and leaf in ("weight", "scale") or "norm" in name and leaf == "weight":
        x = 1.0 + 0.1 * x
    elif len(shape) <= 1:
        x = 0.02 * x
    else:
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        x = x / math.sqrt(max(fan_in, 1))
    return x.to(dtype)


def _fill(layout: dict[str, tuple[tuple[int, ...], torch.dtype]], seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {k: _random(k, shape, dtype, gen) for k, (shape, dtype) in layout.items()}


def _shapes(module: torch.nn.Module, prefix: str, new_prefix: str) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    return {new_prefix + k[len(prefix):]: (tuple(v.shape), v.dtype) for k, v in module.state_dict().items()
            if k.startswith(prefix)}


# ----------------------------------------------------------------------------------------------------- RCG
# spec rcg.md §2 (MoCo v3 ViT table), §4.2 (MAGE-B/L), §3.1 (RDM SimpleMLP), §5 (VQGAN config)
RCG_SIZES = {
    "L": dict(encoder=dict(embed_dim=1024, depth=24, num_heads=16), mage=dict(), vqgan=dict(),
              model="mage_vit_large_patch16", enc_arch="mocov3_vit_large", patch=16, image=256,
              rdm_config="config/rdm/mocov3vitl_simplemlp_l12_w1536.yaml", temp=11.0, cfg=6.0),
    "B": dict(encoder=dict(embed_dim=768, depth=12, num_heads=12),
              mage=dict(embed_dim=768, depth=12, num_heads=12, decoder_embed_dim=768), vqgan=dict(),
              model="mage_vit_base_patch16", enc_arch="mocov3_vit_base", patch=16, image=256,
              rdm_config="config/rdm/mocov3vitb_simplemlp_l12_w1536.yaml", temp=6.0, cfg=1.0),
    # the sizes of tests/fixtures/rcg (its README): the layout check runs the generators at these
    "fixture": dict(encoder=dict(embed_dim=16, depth=2, num_heads=2, proj_hidden_dim=32, rep_dim=16),
                    mage=dict(codebook_size=32, embed_dim=24, depth=2, num_heads=2, decoder_embed_dim=16,
                              decoder_depth=2, decoder_num_heads=2, rep_dim=16),
                    vqgan=dict(ch=32, ch_mult=[1, 1], num_res_blocks=0, z_channels=8, n_embed=32),
                    rdm=dict(in_channels=16, time_embed_dim=32, model_channels=48, bottleneck_channels=40,
                             num_res_blocks=2, context_channels=24),
                    model="mage_vit_tiny_fixture", enc_arch="mocov3_vit_tiny", patch=2, image=32,
                    rdm_config="config/rdm/rdm_tiny.yaml", temp=6.0, cfg=0.0),
}
FIXTURES = ROOT / "tests" / "fixtures"


def _schedule_buffers() -> dict[str, torch.Tensor]:
    """The RDM's 12 diffusion-schedule buffers (spec §3.2: the same linear schedule in every RDM). Taken from the
    official-code fixture, whose values the official DDPM computed; they do not depend on the model size."""
    from zoo.rcg.convert import SCHEDULE_KEYS, load_official

    sd = load_official(FIXTURES / "rcg" / "rdm_tiny" / "rdm_ckpt.pth")["state_dict"]
    return {k: sd[k].clone() for k in SCHEDULE_KEYS}


def mage_layout(size: str = "L") -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Keys of an official MAGE checkpoint's ``model`` (spec §4.2, §4.5): the MAGE modules, the tensors present
    but unused in forward (``pos_embed``, ``decoder_pos_embed``, ``cls_token``, ``mask_token``, ``patch_embed``,
    ``decoder_pred``, ``token_emb.position_ids``), ``pretrained_encoder.*`` (MoCo v3 ViT + projector, §2, §1.4)
    and ``vqgan.*`` (§5)."""
    from zoo.rcg.module import MAGEModule

    s = RCG_SIZES[size]
    with torch.device("meta"):
        m = MAGEModule(mage=s["mage"], vqgan=s["vqgan"], encoder=s["encoder"])
    cfg = m.mage.config
    D, Dd, L = cfg.embed_dim, cfg.decoder_embed_dim, cfg.num_tokens + 1
    f32 = torch.float32
    layout = {
        "fake_latent": ((1, cfg.rep_dim), f32), "cls_token": ((1, 1, D), f32), "pos_embed": ((1, L, D), f32),
        "mask_token": ((1, 1, Dd), f32), "decoder_pos_embed": ((1, L, Dd), f32),
        "token_emb.position_ids": ((1, L), torch.int64),
        "patch_embed.proj.weight": ((D, 3, s["patch"], s["patch"]), f32), "patch_embed.proj.bias": ((D,), f32),
        "decoder_pred.weight": ((s["patch"] ** 2 * 3, Dd), f32), "decoder_pred.bias": ((s["patch"] ** 2 * 3,), f32),
    }
    layout.update(_shapes(m, "mage.", ""))
    layout.update(_shapes(m, "encoder.", "pretrained_encoder."))
    layout.update(_shapes(m, "vqgan.", "vqgan."))
    return layout


def _mage_args(size: str) -> argparse.Namespace:
    s = RCG_SIZES[size]
    rep_dim = s["mage"].get("rep_dim", 256)
    return argparse.Namespace(model=s["model"], use_rep=True, rep_dim=rep_dim, rep_drop_prob=0.1,
                              pretrained_enc_arch=s["enc_arch"], pretrained_enc_withproj=True, temp=s["temp"],
                              num_iter=20, cfg=s["cfg"])


def write_mage(path: str | os.PathLike, size: str = "L", seed: int = 0) -> Path:
    """An official MAGE ``.pth`` (spec §4.5): ``{'model', 'model_ema': None, 'epoch', 'args': Namespace}``; the
    training script's optimizer and scaler state are not in it (the converters never read them)."""
    ckpt = {"model": _fill(mage_layout(size), seed), "model_ema": None, "epoch": 199, "args": _mage_args(size)}
    torch.save(ckpt, path)
    return Path(path)


def rdm_layout(size: str = "L") -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Keys of an official RDM state dict in file order (spec §3.5): schedule buffers, ``model.diffusion_model.*``,
    ``model_ema.decay`` / ``num_updates``, ``model_ema.<name without dots>``, ``pretrained_encoder.*``,
    ``cond_stage_model.embedding.weight`` (unconditional: 1 class)."""
    from zoo.rcg.convert import SCHEDULE_KEYS
    from zoo.rcg.module import RDMModule

    s = RCG_SIZES[size]
    with torch.device("meta"):
        m = RDMModule(rdm=s.get("rdm", {}), encoder=s["encoder"])
    f32 = torch.float32
    layout = {k: ((1000,), f32) for k in SCHEDULE_KEYS}
    raw = _shapes(m, "rdm.denoiser.", "")
    layout.update({f"model.diffusion_model.{k}": v for k, v in raw.items()})
    layout["model_ema.decay"] = ((), f32)
    layout["model_ema.num_updates"] = ((), torch.int32)
    layout.update({"model_ema." + ("diffusion_model." + k).replace(".", ""): v for k, v in raw.items()})
    layout.update(_shapes(m, "encoder.", "pretrained_encoder."))
    layout["cond_stage_model.embedding.weight"] = ((1, m.rdm.config.context_channels), f32)
    return layout


def write_rdm(path: str | os.PathLike, size: str = "L", seed: int = 1, key: str = "model") -> Path:
    """An official RDM ``.pth``: the training script's ``{'model', 'model_ema': None, 'epoch', 'args'}`` (spec
    §3.5; the released files may use ``state_dict`` instead, as the fixtures do: ``key``). ``args.config`` names
    the RDM yaml, whose file name names the encoder (``mocov3vitl_...``)."""
    state = _fill(rdm_layout(size), seed)
    state.update(_schedule_buffers())
    state["model_ema.decay"] = torch.tensor(0.9999)
    state["model_ema.num_updates"] = torch.tensor(1_000_000, dtype=torch.int32)
    args = argparse.Namespace(config=RCG_SIZES[size]["rdm_config"], batch_size=128, blr=1e-6, epochs=200,
                              class_cond=False)
    ckpt = {key: state, "epoch": 199, "args": args} if key == "state_dict" else \
        {"model": state, "model_ema": None, "epoch": 199, "args": args}
    torch.save(ckpt, path)
    return Path(path)


# --------------------------------------------------------------------------------------------------- chess
# spec chess.md §6 (the Haiku tree and parameter count), model table (9M / 136M / 270M), §7 (Orbax layout)
CHESS_SIZES = {"9M": (8, 256, 128), "136M": (8, 1024, 128), "270M": (16, 1024, 128), "fixture": (2, 32, 128)}
CHESS_PARAMS = {"9M": 8_954_240, "136M": 136_479_872, "270M": 270_730_368}


def chess_layout(size: str) -> dict[str, tuple[int, ...]]:
    """The Haiku tree ``{module/param: shape}`` (spec §6): token and position tables, per block two LayerNorms,
    four D×D attention linears and the SwiGLU's three linears ([in, out]), a final LayerNorm and the biased head."""
    L, D, out = CHESS_SIZES[size]
    n = lambda base, i: base if i == 0 else f"{base}_{i}"  # noqa: E731  (Haiku's repeated-module names)
    tree = {"embed/embeddings": (1968, D), "embed_1/embeddings": (79, D)}
    for i in range(L):
        for j in range(4):
            tree[f"{n('multi_head_dot_product_attention', i)}/{n('linear', j)}/w"] = (D, D)
        for idx in (2 * i, 2 * i + 1):
            tree[f"{n('layer_norm', idx)}/scale"] = (D,)
            tree[f"{n('layer_norm', idx)}/offset"] = (D,)
        tree[f"{n('linear', 3 * i)}/w"] = (D, 4 * D)
        tree[f"{n('linear', 3 * i + 1)}/w"] = (D, 4 * D)
        tree[f"{n('linear', 3 * i + 2)}/w"] = (4 * D, D)
    tree[f"{n('layer_norm', 2 * L)}/scale"] = (D,)
    tree[f"{n('layer_norm', 2 * L)}/offset"] = (D,)
    tree[f"{n('linear', 3 * L)}/w"] = (D, out)
    tree[f"{n('linear', 3 * L)}/b"] = (out,)
    return tree


def _chess_value(key: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Spec §5's official init (token table std 0.02, positions std 1, linears 1/sqrt(fan_in), bias 0, LN 1/0),
    with LayerNorms and the head bias perturbed so that every parameter matters."""
    x = rng.standard_normal(shape, dtype=np.float32)
    if key == "embed/embeddings":
        return x * np.float32(0.02 * 10)
    if key == "embed_1/embeddings":
        return x * np.float32(0.5)
    if key.endswith("/w"):
        return x / np.float32(math.sqrt(shape[0]))
    if key.endswith("/scale"):
        return 1 + np.float32(0.3) * x
    return np.float32(0.2) * x


def write_orbax_params(params_dir: Path, size: str, seed: int = 0) -> None:
    """An Orbax PyTree ``params`` folder as orbax-checkpoint writes it (spec §7): an OCDBT TensorStore holding
    zarr-v2 arrays (``<f4``, zstd level 1, one chunk) under ``<module>.<param>/``, plus ``_METADATA``,
    ``_CHECKPOINT_METADATA``, ``_sharding``, ``array_metadatas/process_0`` and ``commit_success.txt``. (Orbax
    writes the arrays through a per-process ``ocdbt.process_0`` database and merges it into the root manifest;
    here they go to the root database directly, which readers open the same way.)"""
    import tensorstore as ts

    params_dir.mkdir(parents=True, exist_ok=True)
    kvstore = {"driver": "ocdbt", "base": f"file://{params_dir.resolve()}/", "config": {"compression": {"id": "zstd"}}}
    rng = np.random.default_rng(seed)
    tree, array_meta, sharding = {}, [], {}
    for key, shape in chess_layout(size).items():
        module, _, param = key.rpartition("/")
        name = f"{module}.{param}"
        spec = {"driver": "zarr", "kvstore": kvstore, "path": name + "/",
                "metadata": {"shape": list(shape), "chunks": list(shape), "dtype": "<f4",
                             "compressor": {"id": "zstd", "level": 1}, "dimension_separator": "."},
                "create": True, "delete_existing": False}
        ts.open(spec).result().write(_chess_value(key, shape, rng)).result()
        tree[str((module, param))] = {
            "key_metadata": [{"key": module, "key_type": 2}, {"key": param, "key_type": 2}],
            "value_metadata": {"value_type": "jax.Array", "skip_deserialize": False, "write_shape": list(shape)}}
        array_meta.append({"array_metadata": {"param_name": name, "write_shape": list(shape),
                                              "chunk_shape": list(shape), "ext_metadata": None}})
        sharding[base64.b64encode(name.encode()).decode()] = json.dumps(
            {"sharding_type": "SingleDeviceSharding", "device_str": "cpu:0"})
    now = time.time_ns()
    (params_dir / "_METADATA").write_text(json.dumps({
        "tree_metadata": tree, "use_ocdbt": True, "use_zarr3": False,
        "store_array_data_equal_to_fill_value": True, "custom_metadata": None}))
    (params_dir / "_CHECKPOINT_METADATA").write_text(json.dumps({
        "item_handlers": "orbax.checkpoint._src.handlers.pytree_checkpoint_handler.PyTreeCheckpointHandler",
        "metrics": {}, "performance_metrics": {}, "init_timestamp_nsecs": now, "commit_timestamp_nsecs": now,
        "custom_metadata": {}}))
    (params_dir / "_sharding").write_text(json.dumps(sharding, separators=(",", ":")))
    (params_dir / "array_metadatas").mkdir(exist_ok=True)
    array_meta.sort(key=lambda a: a["array_metadata"]["param_name"])
    (params_dir / "array_metadatas" / "process_0").write_text(json.dumps({"array_metadatas": array_meta}))
    (params_dir / "commit_success.txt").write_text("Checkpoint commit was successful.\n")


def write_chess_zip(path: str | os.PathLike, size: str = "270M", step: int = 6_400_000, seed: int = 0) -> Path:
    """The release zip ``<size>.zip`` (spec model table: ``9M.zip``, ``136M.zip``, ``270M.zip``; the official
    README unzips it into ``checkpoints/``): ``<size>/<step>/params/...``. Stored, not deflated (zstd data)."""
    path = Path(path)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        write_orbax_params(Path(tmp) / size / str(step) / "params", size, seed)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            for file in sorted(Path(tmp).rglob("*")):
                if file.is_file():
                    archive.write(file, file.relative_to(tmp).as_posix())
    return path


# ------------------------------------------------------------------------------------------------ BitDelta
# spec bitdelta.md §2 (what is compressed), §4 (the file), §8 (Mistral-7B shapes: 224 masks, 65 norms)
MISTRAL = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
               head_dim=128, vocab_size=32000, num_hidden_layers=32)
PROJ = (("self_attn", "q_proj"), ("self_attn", "k_proj"), ("self_attn", "v_proj"), ("self_attn", "o_proj"),
        ("mlp", "gate_proj"), ("mlp", "up_proj"), ("mlp", "down_proj"))


def mistral_linear_shapes(num_layers: int, **cfg: Any) -> dict[str, tuple[int, int]]:
    """``model.layers.<i>.<block>.<proj>`` -> (out, in), the 7 selected projections per layer (spec §2 table)."""
    c = {**MISTRAL, **cfg}
    D, I, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    shape = {"q_proj": (q, D), "k_proj": (kv, D), "v_proj": (kv, D), "o_proj": (D, q), "gate_proj": (I, D),
             "up_proj": (I, D), "down_proj": (D, I)}
    return {f"model.layers.{i}.{block}.{proj}": shape[proj] for i in range(num_layers) for block, proj in PROJ}


def write_bitdelta_diff(path: str | os.PathLike, num_layers: int = 32, vocab: int = 32002, seed: int = 0,
                        dtype: torch.dtype = torch.bfloat16, **cfg: Any) -> Path:
    """An official ``diff.pt`` (spec §4): one dict, first ``<module>.mask`` (int32 (in/32, out), random packed
    bits, about half the words negative) / ``<module>.coeff`` (0-dim fp32 ``nn.Parameter``) pairs in module order,
    then the full-precision parameters in ``named_parameters`` order (``embed_tokens``, per layer
    ``input_layernorm`` and ``post_attention_layernorm``, ``norm``, ``lm_head``) as ``nn.Parameter`` s in the
    model dtype carrying transformers' ``_is_hf_initialized`` (pickled with ``_rebuild_parameter_with_state``).
    ``vocab`` 32002: a fine-tune that added tokens (spec §8)."""
    c = {**MISTRAL, **cfg}
    D = c["hidden_size"]
    gen = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}

    def param(t: torch.Tensor) -> torch.nn.Parameter:
        p = torch.nn.Parameter(t)
        p._is_hf_initialized = True
        return p

    for name, (out_f, in_f) in mistral_linear_shapes(num_layers, **cfg).items():
        state[f"{name}.mask"] = torch.randint(-2**31, 2**31, (in_f // 32, out_f), generator=gen, dtype=torch.int64
                                              ).to(torch.int32)
        state[f"{name}.coeff"] = param(torch.rand((), generator=gen) * 1e-3)
    state["model.embed_tokens.weight"] = param((0.02 * torch.randn(vocab, D, generator=gen)).to(dtype))
    for i in range(num_layers):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            state[f"model.layers.{i}.{norm}.weight"] = param((1 + 0.1 * torch.randn(D, generator=gen)).to(dtype))
    state["model.norm.weight"] = param((1 + 0.1 * torch.randn(D, generator=gen)).to(dtype))
    state["lm_head.weight"] = param((0.02 * torch.randn(vocab, D, generator=gen)).to(dtype))
    torch.save(state, path)
    return Path(path)


def write_mistral_base(directory: str | os.PathLike, num_layers: int = 2, vocab: int = 32000, seed: int = 0,
                       dtype: torch.dtype = torch.bfloat16, **cfg: Any) -> Path:
    """A Mistral-7B-shaped base (spec §8: D 4096, I 14336, 32/8 heads, head dim 128) with ``num_layers`` layers,
    random weights, as a Hugging Face folder; written layer by layer, never holding more than the model."""
    from transformers import MistralConfig, MistralForCausalLM

    c = {**MISTRAL, **cfg, "num_hidden_layers": num_layers, "vocab_size": vocab}
    config = MistralConfig(**c, max_position_embeddings=4096, sliding_window=4096, tie_word_embeddings=False)
    torch.manual_seed(seed)
    with torch.device("meta"):
        model = MistralForCausalLM(config)
    gen = torch.Generator().manual_seed(seed)
    state = {k: _random(k, tuple(v.shape), dtype, gen) for k, v in model.state_dict().items()}
    model.load_state_dict(state, assign=True)
    model.to(dtype)
    model.model.rotary_emb = type(model.model.rotary_emb)(config)  # RoPE's buffers are not saved: rebuild on CPU
    model.save_pretrained(directory)
    return Path(directory)


# --------------------------------------------------------------------------------------------------- EScAIP
# spec escaip.md §8 (config names and defaults), §9 (HydraModel keys, heads, MLIPInferenceCheckpoint)
ESCAIP_BACKBONE_DEFAULTS = dict(
    activation="gelu", angle_embedding_size=8, angle_expansion_size=10, atom_embedding_size=128, atten_dropout=0.0,
    atten_name="math", dataset_list=[], direct_forces=True, distance_function="gaussian",
    edge_distance_embedding_size=512, edge_distance_expansion_size=600, edge_ffn_dropout=0.0, energy_reduce="sum",
    ffn_hidden_layer_multiplier=2, freequency_list=[20, 10, 4, 10, 20], max_atoms=300, max_batch_size=64,
    mlp_dropout=0.0, model="fairchem.core.models.escaip.EScAIP.EScAIPBackbone", node_direction_embedding_size=64,
    node_direction_expansion_size=10, node_ffn_dropout=0.0, normalization="rmsnorm", output_hidden_layer_multiplier=2,
    readout_hidden_layer_multiplier=2, regress_forces=True, regress_stress=False, scalar_output_dropout=0.0,
    stochastic_depth_prob=0.0, use_angle_embedding="none", use_compile=False, use_envelope=True,
    use_fp16_backbone=False, use_frequency_embedding=True, use_global_readout=False, use_graph_attention=False,
    use_message_gate=False, use_padding=False, use_pbc=True, vector_output_dropout=0.0)


def escaip_config(preset: str = "H1024L8", dataset: str = "oc20") -> dict[str, Any]:
    """The ``model_config`` hydra dict (spec §9): the paper preset's backbone kwargs (recipes/escaip/*.yaml:
    H1024L8 is the authors' OC20 model, 16 heads, k 30 / pad 45 / cutoff 6 Å) and the direct heads
    ``<dataset>_energy`` and ``forces``."""
    from zoo.escaip.model import CONFIGS

    backbone = {**ESCAIP_BACKBONE_DEFAULTS, **CONFIGS[preset]}
    return {"_target_": "fairchem.core.models.base.HydraModel", "backbone": backbone,
            "heads": {f"{dataset}_energy": {"module": "fairchem.core.models.escaip.EScAIP.EScAIPEnergyHead"},
                      "forces": {"module": "fairchem.core.models.escaip.EScAIP.EScAIPDirectForceHead"}},
            "pass_through_head_outputs": False}


def escaip_layout(model_config: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """``HydraModel`` state-dict keys (spec §9: ``backbone.*`` and ``output_heads.<head>.*``)."""
    from zoo.escaip.module import EScAIPModule

    backbone = {k: v for k, v in model_config["backbone"].items() if k != "model"}
    with torch.device("meta"):
        m = EScAIPModule(backbone=backbone, heads=model_config["heads"])
    return _shapes(m, "model.", "")


def write_escaip_checkpoint(path: str | os.PathLike, preset: str = "H1024L8", dataset: str = "oc20",
                            seed: int = 0) -> Path:
    """A fairchem ``MLIPInferenceCheckpoint`` pickle (spec §9): ``model_config``, ``model_state_dict``,
    ``ema_state_dict`` (``AveragedModel``: ``n_averaged`` + ``module.``-prefixed keys, different values) and
    ``tasks_config`` (energy and forces tasks with normalisers). The class is pickled under fairchem's name."""
    from zoo.escaip.convert import CHECKPOINT_CLASS, InferenceCheckpoint

    config = escaip_config(preset, dataset)
    layout = escaip_layout(config)
    weights = _fill(layout, seed)
    ema = {"n_averaged": torch.tensor(50_000)}
    ema.update({f"module.{k}": v + 0.01 * torch.randn_like(v) for k, v in _fill(layout, seed + 1).items()})
    norm = "fairchem.core.modules.normalization.normalizer.Normalizer"
    spec = "fairchem.core.units.mlip_unit.mlip_unit.OutputSpec"
    tasks = [
        {"_target_": "fairchem.core.units.mlip_unit.mlip_unit.Task", "name": f"{dataset}_energy", "level": "system",
         "property": "energy", "out_spec": {"_target_": spec, "dim": [1], "dtype": "float32"},
         "normalizer": {"_target_": norm, "mean": 0.0, "rmsd": 2.0}, "datasets": [dataset], "metrics": ["mae"]},
        {"_target_": "fairchem.core.units.mlip_unit.mlip_unit.Task", "name": "forces", "level": "atom",
         "property": "forces", "out_spec": {"_target_": spec, "dim": [3], "dtype": "float32"},
         "normalizer": {"_target_": norm, "mean": 0.0, "rmsd": 0.5}, "datasets": [dataset], "metrics": ["mae"]},
    ]
    ckpt = InferenceCheckpoint(model_config=config, model_state_dict=weights, ema_state_dict=ema, tasks_config=tasks)
    module, _, name = CHECKPOINT_CLASS.rpartition(".")
    cls = InferenceCheckpoint
    saved = (cls.__module__, cls.__qualname__)
    cls.__module__, cls.__qualname__ = module, name  # pickled under fairchem's class path, as the real file
    parts = module.split(".")
    added = [".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) not in sys.modules]
    try:  # fairchem is not installed: stand-in modules only while pickling
        for mod in added:
            sys.modules[mod] = type(sys)(mod)
        setattr(sys.modules[module], name, cls)
        torch.save(ckpt, path)
    finally:
        cls.__module__, cls.__qualname__ = saved
        for mod in added:
            del sys.modules[mod]
    return Path(path)


# ------------------------------------------------------------------------------------------------ measuring
_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {bench!r})

def _hwm_kb():  # this process's peak RSS (VmHWM: unlike ru_maxrss, not inherited from the forking parent)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

{setup}
base_kb = _hwm_kb()
start = time.perf_counter()
{body}
seconds = time.perf_counter() - start
peak_kb = _hwm_kb()
print("@@RESULT@@" + json.dumps({{"seconds": seconds, "peak_rss": peak_kb * 1024, "baseline_rss": base_kb * 1024,
                                  "result": globals().get("result")}}))
"""


def run_measured(body: str, setup: str = "import torch, zoo", threads: int | None = None, timeout: float = 1800,
                 env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``body`` in a fresh Python process; return its wall time, peak RSS (bytes: ``VmHWM`` of that process;
    ``ru_maxrss`` would include the forking parent's), the peak after ``setup`` (imports: the baseline) and whatever
    ``body`` assigned to ``result``."""
    import subprocess

    code = _CHILD.format(root=str(ROOT), bench=str(ROOT / "benchmarks"), setup=setup, body=body)
    child_env = {**os.environ, **(env or {})}
    if threads is not None:
        child_env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=child_env, cwd=str(ROOT))
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT@@")]
    if proc.returncode or not marker:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(marker[-1][len("@@RESULT@@"):])


def dir_bytes(path: str | os.PathLike) -> int:
    path = Path(path)
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ------------------------------------------------------------------------------------------------------ CLI
WRITERS = {
    "rcg": lambda d: [write_mage(d / "mage-vitl.pth"), write_rdm(d / "rdm-mocov3vitl.pth")],
    "chess": lambda d: [write_chess_zip(d / f"{s}.zip", s) for s in ("9M", "136M", "270M")],
    "bitdelta": lambda d: [write_bitdelta_diff(d / "diff.pt")],
    "escaip": lambda d: [write_escaip_checkpoint(d / "escaip-h1024l8.pt")],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("methods", nargs="*", default=sorted(WRITERS), choices=sorted(WRITERS))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for method in args.methods:
        for path in WRITERS[method](args.out):
            print(f"{path}  {path.stat().st_size / 1e9:.3f} GB")


if __name__ == "__main__":
    main()
