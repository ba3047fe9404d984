"""Paths and helpers for the RCG fixtures (official tiny checkpoints and their recorded inputs/outputs)."""

from pathlib import Path

import torch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rcg"
# head counts of the tiny fixture networks (not recoverable from weight shapes)
TINY = {"encoder": {"num_heads": 2}, "mage": {"num_heads": 2, "decoder_num_heads": 2}}


def io(name: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(FIXTURES / name / "io.safetensors"))


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a.double() - b.double()).abs().max().item()
