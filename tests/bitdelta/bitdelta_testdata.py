"""Paths, loaders and helpers for the BitDelta tests (the official tiny-Llama fixture models, diffs and logits)."""

import copy
from pathlib import Path

import lightning as L
import torch

from zoo.bitdelta.delta import linear_weight

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bitdelta"
MODULES_CHECKED = ("model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj", "model.layers.1.self_attn.v_proj")


def hf_model(name: str, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(FIXTURES / name, dtype=dtype).eval()


def logit_error(model, logits, key: str) -> float:
    """The largest difference between ``model``'s logits on the fixture inputs and the official ``logits[key]``."""
    with torch.no_grad():
        out = model(input_ids=logits["input_ids"]).logits
    return (out - logits[key]).abs().max().item()


def perturbed(model, seed: int = 0, scale: float = 1e-2):
    """A "fine-tune" of ``model``: a copy with seeded noise of std ``scale`` added to every parameter."""
    finetune = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in finetune.parameters():
            p.add_((scale * torch.randn(p.shape, generator=g)).to(p.dtype))
    return finetune.eval()


def reconstruct(base, finetune, delta):
    """The compressed fine-tune by definition (official load_diff): W_base + (α·sign(Δ) in fp32, cast), every other
    tensor from the fine-tune."""
    expected = copy.deepcopy(finetune)
    with torch.no_grad():
        for name in delta.modules:
            w_base = linear_weight(base.get_submodule(name))
            sign = torch.where(linear_weight(finetune.get_submodule(name)) - w_base >= 0, 1.0, -1.0)
            linear_weight(expected.get_submodule(name)).copy_(w_base + (delta.scales[name] * sign).to(w_base.dtype))
    return expected


def cpu_trainer(tmp_path, steps: int, **kwargs) -> L.Trainer:
    """A quiet CPU Trainer for ``steps`` steps (no logger, checkpoints or progress bar unless ``kwargs`` say so)."""
    quiet = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
             "enable_model_summary": False}
    return L.Trainer(max_steps=steps, accelerator="cpu", default_root_dir=tmp_path, **{**quiet, **kwargs})
