"""The ChessBench transformer (searchless_chess ``transformer_decoder``) as plain PyTorch modules.

A bidirectional (no causal mask) pre-LN decoder over a BOS-shifted token sequence:
    u = [0, x[0], ..., x[T-2]]                 # BOS shift, last target dropped
    h = E[u] * sqrt(D) + P[:T]                  # shared 1968-row token table, learned positions
    h = h + Attn(LN(h)); h = h + MLP(LN(h))     # x L, bias-free Q/K/V/O, SwiGLU MLP of width 4D
    log_softmax(Head(LN(h)))                    # head with bias

``ChessTransformer.forward`` returns every position's log-probs (training); ``LastPositionPredictor`` computes the
last position's alone with less work (the engines' network call, float32 or opt-in bfloat16).
"""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from zoo.chess.bag import check_policy
from zoo.chess.tokenizer import FEN_LENGTH, NUM_ACTIONS

__all__ = ["ChessTransformerConfig", "ChessTransformer"]

LN_EPS = 1e-5


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
        check_policy(self.policy)
        if self.embedding_dim % self.num_heads:
            raise ValueError(f"embedding_dim {self.embedding_dim} is not divisible by num_heads {self.num_heads}")
        # AV: FEN + action + return bucket (79); SV: FEN + bucket (78); BC: FEN + action (78)
        needed = FEN_LENGTH + (2 if self.policy == "action_value" else 1)
        if self.max_sequence_length < needed:
            raise ValueError(f"max_sequence_length must be >= {needed} for {self.policy}")

    @property
    def output_size(self) -> int:
        return NUM_ACTIONS if self.policy == "behavioral_cloning" else self.num_return_buckets


# ----------------------------------------------------------------------------- blocks
class SelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))

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
        self.ln_attn = nn.LayerNorm(cfg.embedding_dim, eps=LN_EPS)
        self.attn = SelfAttention(cfg.embedding_dim, cfg.num_heads)
        self.ln_mlp = nn.LayerNorm(cfg.embedding_dim, eps=LN_EPS)
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
        self.ln_final = nn.LayerNorm(D, eps=LN_EPS)
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


# ----------------------------------------------------------------------------- inference
PRECISIONS = ("fp32", "bf16")
CPU_CHUNK_ROWS = 64  # rows per pass on CPU: enough for efficient matmuls, few enough for activations to stay in cache

# measured on x86 only; elsewhere oneDNN may fall back to slow reference kernels
_ONEDNN_LINEAR = (getattr(torch.ops.mkldnn, "_linear_pointwise", None)
                  if torch.backends.mkldnn.is_available() and platform.machine().lower() in ("x86_64", "amd64") else None)


def _linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T``. Float32 on CPU goes through oneDNN: ~25% faster than the default BLAS at these sizes
    (bfloat16 already does)."""
    if _ONEDNN_LINEAR is not None and x.device.type == "cpu" and x.dtype == torch.float32:
        return _ONEDNN_LINEAR(x, weight, None, "none", [], "")
    return F.linear(x, weight)


@dataclass
class _PackedBlock:
    """One block's weights for ``LastPositionPredictor``: matmul weights in the compute dtype, the rest float32."""

    ln_attn: tuple[torch.Tensor, torch.Tensor]  # LayerNorm (scale, offset)
    ln_mlp: tuple[torch.Tensor, torch.Tensor]
    qkv: torch.Tensor  # (3D, D): Q (times 1/sqrt(d)), K, V stacked for one matmul
    o: torch.Tensor  # (D, D)
    gate: torch.Tensor  # (4D, D)
    up: torch.Tensor  # (4D, D)
    down: torch.Tensor  # (D, 4D)


class LastPositionPredictor:
    """``model(targets)[:, -1]`` for inference (all the engines read), with less work:

    * Q, K and V come from one matmul; every matmul runs on ``(B*T, D)`` rows, on CPU in chunks of ``CPU_CHUNK_ROWS``.
    * The last block computes keys and values at every position, the rest at the last position alone. Nothing earlier
      can be skipped: attention is bidirectional, so the move token changes every position from the first block on.

    ``precision="fp32"``: the model's function, summed in another order (~1e-6 apart). ``"bf16"`` runs matmuls and
    attention products in bfloat16 (float32 accumulation, residual stream, LayerNorms, softmax and head): about 1.9x
    faster on CPUs with AVX512-BF16 or AMX, but win probabilities move by up to ~1e-2, so it is opt-in. Weights are
    packed once in the compute dtype and repacked when a parameter changes."""

    def __init__(self, model: ChessTransformer, precision: str = "fp32"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.model = model
        self.precision = precision
        self.dtype = torch.float32 if precision == "fp32" else torch.bfloat16
        self._packed: list[_PackedBlock] = []
        self._key: tuple = ()

    def _blocks(self) -> list[_PackedBlock]:
        key = tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in self.model.parameters())
        if key != self._key:
            self._packed = [self._pack(block) for block in self.model.blocks]
            self._key = key
        return self._packed

    def _pack(self, block: Block) -> _PackedBlock:
        def cast(*weights: torch.Tensor) -> torch.Tensor:  # no copy of a lone weight already in the dtype
            stacked = torch.cat([w.detach() for w in weights]) if len(weights) > 1 else weights[0].detach()
            return stacked.to(self.dtype).contiguous()

        def norm(ln: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor]:
            return ln.weight.detach().float(), ln.bias.detach().float()

        attn, mlp = block.attn, block.mlp
        scaled_q = attn.q.weight.detach().float() / math.sqrt(attn.q.weight.shape[0] // attn.num_heads)  # 1/sqrt(d) folded in
        return _PackedBlock(norm(block.ln_attn), norm(block.ln_mlp), cast(scaled_q, attn.k.weight, attn.v.weight),
                            cast(attn.o.weight), cast(mlp.gate.weight), cast(mlp.up.weight), cast(mlp.down.weight))

    @torch.no_grad()
    def __call__(self, targets: torch.Tensor) -> torch.Tensor:
        """Float32 log-probs ``(B, out)`` at the last position of the target sequences ``(B, T)``."""
        B, T = targets.shape
        if T > self.model.cfg.max_sequence_length:
            raise ValueError(f"sequences of length {T} exceed max_sequence_length {self.model.cfg.max_sequence_length}")
        if B == 0:
            return torch.zeros(0, self.model.cfg.output_size, device=targets.device)
        blocks = self._blocks()
        chunk = CPU_CHUNK_ROWS if targets.device.type == "cpu" else B
        return torch.cat([self._forward(targets[i : i + chunk], blocks) for i in range(0, B, chunk)])

    def _norm(self, h: torch.Tensor, ln: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.layer_norm(h, h.shape[-1:], *ln, eps=LN_EPS).to(self.dtype)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Queries ``(B, H, S, d)`` over all keys/values ``(B, H, T, d)`` -> ``(B*S, H*d)``."""
        B, H, S, d = q.shape
        # plain matmuls: at T = 79 they beat scaled_dot_product_attention's CPU kernel in bfloat16 (same in float32)
        logits = torch.matmul(q, k.transpose(-1, -2))  # (B, H, S, T); the packed Wq holds the 1/sqrt(d)
        weights = torch.softmax(logits, dim=-1, dtype=torch.float32).to(self.dtype)
        return torch.matmul(weights, v).transpose(1, 2).reshape(B * S, H * d)

    def _mlp(self, h: torch.Tensor, block: _PackedBlock) -> torch.Tensor:
        y = self._norm(h, block.ln_mlp)
        return _linear(F.silu(_linear(y, block.gate), inplace=True).mul_(_linear(y, block.up)), block.down)

    def _forward(self, targets: torch.Tensor, blocks: list[_PackedBlock]) -> torch.Tensor:
        model, (B, T) = self.model, targets.shape
        D, H = model.cfg.embedding_dim, model.cfg.num_heads
        inputs = F.pad(targets[:, :-1], (1, 0), value=0)  # BOS shift: (B, T)
        embedded = model.token_embedding(inputs).float() * math.sqrt(D) + model.position_embedding[:T].float()  # (B, T, D)
        h = embedded.view(B * T, D)  # the residual stream stays float32
        for block in blocks[:-1]:
            qkv = _linear(self._norm(h, block.ln_attn), block.qkv)  # (B*T, 3D)
            q, k, v = qkv.view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)  # (B, H, T, d) each
            h += _linear(self._attend(q, k, v), block.o)
            h += self._mlp(h, block)
        # the last block: keys and values at every position, everything else at the last position only
        last = blocks[-1]
        y = self._norm(h, last.ln_attn).view(B, T, D)
        kv = _linear(y.view(B * T, D), last.qkv[D:])  # (B*T, 2D)
        k, v = kv.view(B, T, 2, H, D // H).permute(2, 0, 3, 1, 4)  # (B, H, T, d) each
        # a lone row would meet one-row matmul kernels, whose sums differ in the last bits from the batched ones:
        # it goes through twice so that results never depend on the batch
        rows = [0, 0] if B == 1 else slice(None)
        q = _linear(y[rows, -1], last.qkv[:D]).view(-1, H, 1, D // H)  # (B', H, 1, d)
        h = h.view(B, T, D)[rows, -1] + _linear(self._attend(q, k[rows], v[rows]), last.o)  # (B', D)
        h += self._mlp(h, last)
        ln, head = model.ln_final, model.head
        y = F.layer_norm(h, (D,), ln.weight.float(), ln.bias.float(), LN_EPS)
        logits = _linear(y, head.weight.float()) + head.bias.float()  # (B', out)
        return F.log_softmax(logits[:B], dim=-1)  # (B, out)
