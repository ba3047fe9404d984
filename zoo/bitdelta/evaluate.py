"""Evaluation: held-out perplexity, and how closely a compressed model's logits follow the fine-tune's."""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F
from torch import nn

from zoo.bitdelta._base import load_model
from zoo.bitdelta.data import load_token_rows
from zoo.bitdelta.module import causal_lm_loss, model_logits

__all__ = ["perplexity", "logit_agreement", "recovered_fraction"]


def _batches(model: nn.Module, data, tokenizer, max_length: int, batch_size: int) -> tuple[torch.Tensor, ...]:
    """Token rows (given, or windows of a text file) on ``model``'s device, in batches."""
    rows = data.long() if isinstance(data, torch.Tensor) else load_token_rows(data, tokenizer, max_length)
    return rows.to(next(model.parameters()).device).split(batch_size)


@torch.no_grad()
def perplexity(model: nn.Module, data: str | os.PathLike | torch.Tensor, *, tokenizer="bytes", max_length: int = 128,
               batch_size: int = 8) -> dict[str, float]:
    """exp(mean next-token NLL) over non-overlapping ``max_length`` windows of a held-out text file (or token rows).

    Returns ``{"ppl", "nll", "tokens"}``; every window predicts its tokens 2..L from the ones before."""
    total, count = 0.0, 0
    for ids in _batches(model, data, tokenizer, max_length, batch_size):
        logits = model_logits(model, {"input_ids": ids})
        total += causal_lm_loss(logits, ids, reduction="sum").item()
        count += ids[:, 1:].numel()
    nll = total / count
    return {"ppl": math.exp(nll), "nll": nll, "tokens": count}


@torch.no_grad()
def logit_agreement(model: nn.Module, reference: nn.Module, data: str | os.PathLike | torch.Tensor, *,
                    tokenizer="bytes", max_length: int = 128, batch_size: int = 8) -> dict[str, float]:
    """How well ``model`` reproduces ``reference`` (the fine-tune) on the same inputs.

    ``mse``: mean squared logit difference (the distillation loss); ``max_abs``: largest logit difference;
    ``kl``: mean KL(reference ‖ model) per token in nats; ``top1``: fraction of positions with the same argmax."""
    sq, kl, top1, n_logits, n_pos, max_abs = 0.0, 0.0, 0, 0, 0, 0.0
    for ids in _batches(model, data, tokenizer, max_length, batch_size):
        a = model_logits(model, {"input_ids": ids}).float()
        b = model_logits(reference, {"input_ids": ids}).float()
        if a.shape != b.shape:
            raise ValueError(f"logit shapes differ: {tuple(a.shape)} vs {tuple(b.shape)} (different vocabularies?)")
        sq += (a - b).pow(2).sum().item()
        max_abs = max(max_abs, (a - b).abs().max().item())
        kl += F.kl_div(a.log_softmax(-1), b.log_softmax(-1), log_target=True, reduction="sum").item()
        top1 += (a.argmax(-1) == b.argmax(-1)).sum().item()
        n_logits += a.numel()
        n_pos += a.shape[0] * a.shape[1]
    return {"mse": sq / n_logits, "max_abs": max_abs, "kl": kl / n_pos, "top1": top1 / n_pos}


def recovered_fraction(nll_base: float, nll_finetune: float, nll_delta: float) -> float:
    """How much of the fine-tune's loss improvement over the base the delta keeps: 1 = all of it, 0 = none."""
    gain = nll_base - nll_finetune
    if gain <= 0:
        raise ValueError(f"the fine-tune ({nll_finetune:.4f}) does not improve on the base ({nll_base:.4f}) on this text")
    return (nll_base - nll_delta) / gain


def compare_delta(delta: nn.Module, data: str | os.PathLike | torch.Tensor, *, finetune: str | None = None,
                  base: str | None = None, relative_to: str | os.PathLike | None = None, **opts) -> dict:
    """The :func:`perplexity` of a loaded ``delta`` on ``data`` ("bitdelta"); given the ``finetune`` it compresses,
    also the fine-tune's and the base's (``base``, else the one the delta names, found beside ``relative_to``), the
    :func:`logit_agreement` with the fine-tune and, where the fine-tune improves on the base, the
    :func:`recovered_fraction`. ``opts``: :func:`perplexity`'s tokenizer, max_length and batch_size."""
    results = {"bitdelta": perplexity(delta, data, **opts)}
    if finetune:
        dtype = delta.hparams.base_dtype
        tuned = load_model(finetune, dtype=dtype)
        results["finetune"] = perplexity(tuned, data, **opts)
        results["agreement"] = logit_agreement(delta, tuned, data, **opts)
        base_model = load_model(base or delta.hparams.base, revision=delta.hparams.base_revision, dtype=dtype,
                                relative_to=relative_to)
        results["base"] = perplexity(base_model, data, **opts)
        nll = {name: results[name]["nll"] for name in ("base", "finetune", "bitdelta")}
        if nll["base"] > nll["finetune"]:
            results["recovered"] = recovered_fraction(nll["base"], nll["finetune"], nll["bitdelta"])
    return results
