"""Multi-tenant serving: one base model in memory, many fine-tunes as 1-bit deltas, one batch.

    server = MultiTenantLM.from_repos(["delta-a", "delta-b"])          # loads the shared base once
    logits = server(input_ids, tenants=[0, 1, 0, 1]).logits           # row i runs tenant tenants[i]
    tokens = server.generate(input_ids, tenants=[0, 1], max_new_tokens=20)

Row i equals tenant i's own merged model (:func:`zoo.bitdelta.model.apply_deltas_`).
"""

from __future__ import annotations

import os
from typing import Sequence

import torch
from torch import nn

from zoo.bitdelta._base import base_source, load_model
from zoo.bitdelta.delta import BitDelta
from zoo.bitdelta.model import apply_deltas_, use_tenants

__all__ = ["MultiTenantLM"]


class MultiTenantLM(nn.Module):
    def __init__(self, base: nn.Module, deltas: Sequence[BitDelta], *, verify_base: bool = True, block_size: int = 1024):
        super().__init__()
        for i, delta in enumerate(deltas):
            try:
                delta.check_base(base, verify=verify_base)
            except ValueError as err:
                raise ValueError(f"tenant {i}: {err}") from None
        self.model = apply_deltas_(base, deltas, merged=False, block_size=block_size)
        self.tokenizer_source: str | None = None  # where the base's tokenizer lives (set by from_repos)

    @classmethod
    def from_repos(cls, deltas: Sequence[str | os.PathLike], *, base: str | os.PathLike | nn.Module | None = None,
                   verify_base: bool = True, device: str | torch.device = "cpu",
                   with_base: bool = False) -> "MultiTenantLM":
        """Load delta repos (zoo names or folders) that share one base; the base is loaded once.

        ``with_base=True`` adds the base itself as the last tenant (a delta with zero scales that carries nothing)."""
        from zoo.hub import resolve_repo

        loaded = [BitDelta.load(resolve_repo(d)) for d in deltas]
        if not loaded:
            raise ValueError("MultiTenantLM.from_repos needs at least one delta")
        names = {(d.base_sha256 or d.base) for d in loaded}
        if len(names) > 1:
            raise ValueError(f"the deltas name different bases ({sorted(map(str, names))}); one server shares one base")
        first = loaded[0]
        if with_base:
            loaded.append(BitDelta(masks=first.masks, scales={n: torch.zeros(()) for n in first.scales},
                                   shapes=first.shapes, **first.identity()))
        folder = resolve_repo(deltas[0])
        model = load_model(base if base is not None else first.base, revision=first.base_revision,
                           dtype=first.base_dtype, device=device, relative_to=folder)
        server = cls(model, loaded, verify_base=verify_base)
        server.tokenizer_source = base_source(base, first.base, folder)
        return server

    def forward(self, *args, tenants: torch.Tensor | Sequence[int], **kwargs):
        with use_tenants(self.model, tenants):
            return self.model(*args, **kwargs)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, *, tenants: torch.Tensor | Sequence[int], **kwargs) -> torch.Tensor:
        """``model.generate`` with row i decoded by tenant ``tenants[i]`` (rows keep their order: no beam search)."""
        if kwargs.get("num_beams", 1) != 1:
            raise ValueError("multi-tenant generation keeps one row per request; beam search (num_beams > 1) reorders rows")
        from zoo.bitdelta.module import causal_lm

        with use_tenants(self.model, tenants):
            return causal_lm(self.model).generate(input_ids, **kwargs)
