"""The ChessBench transformer (searchless_chess ``transformer_decoder``) as plain PyTorch modules.

A bidirectional (no causal mask) pre-LN decoder over a BOS-shifted token sequence:
    u = [0, x[0], ..., x[T-2]]                 # BOS shift, last target dropped
    h = E[u] * sqrt(D) + P[:T]                  # shared 1968-row token table, learned positions
    h = h + Attn(LN(h)); h = h + MLP(LN(h))     # x L, bias-free Q/K/V/O, SwiGLU MLP of width 4D
    log_softmax(Head(LN(h)))                    # head with bias
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from zoo.chess.tokenizer import FEN_LENGTH, NUM_ACTIONS

__all__ = ["ChessTransformerConfig", "ChessTransformer", "CONFIGS", "POLICIES", "sequence_length", "output_size"]

POLICIES = ("action_value", "state_value", "behavioral_cloning")


def sequence_length(policy: str) -> int:
    """AV: FEN + action + return bucket (79); SV: FEN + bucket (78); BC: FEN + action (78)."""
    _check_policy(policy)
    return FEN_LENGTH + (2 if policy == "action_value" else 1)


def output_size(policy: str, num_return_buckets: int = 128) -> int:
    _check_policy(policy)
    return NUM_ACTIONS if policy == "behavioral_cloning" else num_return_buckets


def _check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")


@dataclass
class ChessTransformerConfig:
    policy: str = "action_value"
    num_layers: int = 8
    embedding_dim: int = 256
    num_heads: int = 8
    widening_factor: int = 4
    num_return_buckets: int = 128
    vocab_size: int = NUM_ACTIONS  # FEN tokens, actions and buckets share one id space
    max_sequence_length: int = FEN_LENGTH + 2  # 79 rows of positions even for 78-token policies

    def __post_init__(self) -> None:
        _check_policy(self.policy)
        if self.embedding_dim % self.num_heads:
            raise ValueError(f"embedding_dim {self.embedding_dim} is not divisible by num_heads {self.num_heads}")
        if self.max_sequence_length < sequence_length(self.policy):
            raise ValueError(f"max_sequence_length must be >= {sequence_length(self.policy)} for {self.policy}")

    @property
    def output_size(self) -> int:
        return output_size(self.policy, self.num_return_buckets)

    @property
    def sequence_length(self) -> int:
        return sequence_length(self.policy)


# name -> architecture (the official sizes, the example "local" one and small CPU sizes)
CONFIGS: dict[str, dict] = {
    "9M": dict(num_layers=8, embedding_dim=256, num_heads=8),
    "136M": dict(num_layers=8, embedding_dim=1024, num_heads=8),
    "270M": dict(num_layers=16, embedding_dim=1024, num_heads=8),
    "local": dict(num_layers=4, embedding_dim=64, num_heads=4),
    "tiny": dict(num_layers=2, embedding_dim=32, num_heads=4),
}


# ----------------------------------------------------------------------------- blocks


class SelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        # heads are contiguous chunks of the channel axis: (B, T, C) -> (B, H, T, C/H)
        q, k, v = (proj(x).view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v)  # bidirectional: no mask
        return self.o(y.transpose(1, 2).reshape(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)  # Haiku's first MLP linear
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg: ChessTransformerConfig):
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.embedding_dim, eps=1e-5)
        self.attn = SelfAttention(cfg.embedding_dim, cfg.num_heads)
        self.ln_mlp = nn.LayerNorm(cfg.embedding_dim, eps=1e-5)
        self.mlp = SwiGLU(cfg.embedding_dim, cfg.widening_factor * cfg.embedding_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x))


# ----------------------------------------------------------------------------- model


class ChessTransformer(nn.Module):
    def __init__(self, cfg: ChessTransformerConfig):
        super().__init__()
        self.cfg = cfg
        D = cfg.embedding_dim
        self.token_embedding = nn.Embedding(cfg.vocab_size, D)
        self.position_embedding = nn.Parameter(torch.empty(cfg.max_sequence_length, D))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.ln_final = nn.LayerNorm(D, eps=1e-5)
        self.head = nn.Linear(D, cfg.output_size, bias=True)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The official initialisation (truncated normals; std 1/sqrt(fan_in) for linears)."""
        if self.position_embedding.is_meta:
            return  # built for loading: weights are assigned afterwards
        nn.init.trunc_normal_(self.token_embedding.weight, std=0.02, a=-0.04, b=0.04)
        nn.init.trunc_normal_(self.position_embedding, std=1.0, a=-2.0, b=2.0)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                std = 1 / math.sqrt(m.in_features)
                nn.init.trunc_normal_(m.weight, std=std, a=-2 * std, b=2 * std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, targets: torch.Tensor) -> torch.Tensor:
        """Log-probs ``(B, T, out)`` for every position of the target sequences ``(B, T)``."""
        B, T = targets.shape
        if T > self.cfg.max_sequence_length:
            raise ValueError(f"sequences of length {T} exceed max_sequence_length {self.cfg.max_sequence_length}")
        inputs = F.pad(targets[:, :-1], (1, 0), value=0)  # BOS shift: (B, T)
        h = self.token_embedding(inputs) * math.sqrt(self.cfg.embedding_dim) + self.position_embedding[:T]  # (B, T, D)
        for block in self.blocks:
            h = block(h)
        return F.log_softmax(self.head(self.ln_final(h)), dim=-1)  # (B, T, out)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def config_dict(self) -> dict:
        return asdict(self.cfg)
