"""Packed sign bits: the storage layout of a BitDelta mask and the matmul that reads it.

The layout (:data:`BIT_ORDER`, :data:`SIGN_CONVENTION`) is the official one, kept so official files convert without
repacking. A delta of exactly zero is bit 1 (+scale), as in the official code (the paper's Sign would give -scale).
"""

from __future__ import annotations

import torch

WORD_BITS = 32
BIT_ORDER = ("int32 words of shape (ceil(in/32), out); bit j (value 2**j) of word w in column o is input index 32*w+j "
             "(LSB first along the input axis); two's complement; padding bits past `in` are 1")
SIGN_CONVENTION = "bit 1 iff delta >= 0 (delta == 0 gives +scale); value = (2*bit - 1) * scale"

_SHIFTS = torch.arange(WORD_BITS, dtype=torch.int32)


def pack_signs(delta: torch.Tensor) -> torch.Tensor:
    """Sign bits of ``delta`` (out, in), packed to int32 (ceil(in/32), out)."""
    if delta.dim() != 2:
        raise ValueError(f"pack_signs expects a 2-d (out, in) delta, got shape {tuple(delta.shape)}")
    out_features, in_features = delta.shape
    words = -(-in_features // WORD_BITS)
    bits = torch.ones(words * WORD_BITS, out_features, dtype=torch.int64, device=delta.device)
    bits[:in_features] = (delta >= 0).T.to(torch.int64)  # (in, out)
    shifted = bits.view(words, WORD_BITS, out_features) << _SHIFTS.to(delta.device, torch.int64).view(1, -1, 1)
    packed = shifted.sum(dim=1)  # (words, out) in [0, 2**32)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed)  # wrap to two's complement explicitly
    return packed.to(torch.int32)


def unpack_bits(mask: torch.Tensor, in_features: int, dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    """int32 (words, out) -> bits (in, out) as 0/1 in ``dtype`` (arithmetic shift, then AND 1)."""
    words, out_features = mask.shape
    if not (words - 1) * WORD_BITS < in_features <= words * WORD_BITS:
        raise ValueError(f"a mask of {words} words per column cannot hold {in_features} inputs")
    bits = mask.unsqueeze(1) >> _SHIFTS.to(mask.device).view(1, -1, 1)  # (words, 32, out)
    bits &= 1
    return bits.view(words * WORD_BITS, out_features)[:in_features].to(dtype)


def unpack_signs(mask: torch.Tensor, in_features: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """int32 (words, out) -> signs (out, in) in ``dtype``, each +1 or -1."""
    return unpack_bits(mask, in_features, dtype).T * 2 - 1


def signed_matmul(x: torch.Tensor, mask: torch.Tensor, in_features: int, block: int = 1024) -> torch.Tensor:
    """x · Sᵀ for the packed signs S (out, in): (..., in) -> (..., out).

    The signs are unpacked ``block`` output columns at a time, so at most (in × block) ±1 values exist at once
    and no full-precision delta is ever materialised. Autograd flows to ``x`` (the signs are constants)."""
    parts = [x @ unpack_bits(mask[:, start : start + block], in_features, x.dtype).mul_(2).sub_(1)  # (..., blk)
             for start in range(0, mask.shape[1], block)]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
