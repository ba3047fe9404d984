"""MAGE's Float32LogitsAttention re-implements timm ``Attention.forward`` (float32 logits under autocast) on timm's
own submodules, and timm is unpinned above 1.0: this fails as soon as a timm release changes what that forward
computes or which parts it has."""

import torch
from timm.layers import Attention
from torch import nn

from zoo.rcg.model import Float32LogitsAttention


def test_float32_logits_attention_matches_timm_attention():
    torch.manual_seed(0)
    ours = Float32LogitsAttention(64, num_heads=4, qkv_bias=True).eval()
    theirs = Attention(64, num_heads=4, qkv_bias=True).eval()
    theirs.load_state_dict(ours.state_dict())  # the same parameters, by name
    # what our forward skips must be identities in timm's default configuration
    for name in ("q_norm", "k_norm", "norm"):
        assert isinstance(getattr(ours, name, nn.Identity()), nn.Identity), name
    x = torch.randn(2, 10, 64)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-6)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert ours(x).dtype == torch.bfloat16  # the projections still run in the autocast dtype
