"""Paths and loaders for the BitDelta fixtures (the official tiny-Llama models, diffs and logits)."""

from pathlib import Path

import torch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bitdelta"
MODULES_CHECKED = ("model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj", "model.layers.1.self_attn.v_proj")


def hf_model(name: str, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(FIXTURES / name, dtype=dtype).eval()
