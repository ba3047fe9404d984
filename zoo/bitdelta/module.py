"""BitDelta LightningModules: a fine-tune loaded as base + 1-bit delta, scale distillation, and the zoo's own LM."""

from __future__ import annotations

import contextlib
import copy
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from zoo._lightning import L, rank_zero_info
from zoo.io import DEFAULT_SHARD_BYTES
from zoo.bitdelta._base import base_source, load_model, load_pair
from zoo.bitdelta.catalog import PAPER
from zoo.bitdelta.delta import BitDelta, compress
from zoo.bitdelta.model import apply_deltas_, compressed_layers, delta_from_model
from zoo.errors import ConfigError
from zoo.module import ZooModule, parse_dtype
from zoo.schedules import warmup_cosine
from zoo.training import weight_decay_groups

__all__ = ["CausalLM", "BitDeltaModule", "ScaleDistillation", "model_logits", "causal_lm_loss", "causal_lm",
           "text_tokenizer", "generate_text"]


# ----------------------------------------------------------------------------- batches
def model_logits(model: nn.Module, batch: Any) -> torch.Tensor:
    """Run ``model`` on a batch: a dict of keyword inputs (``input_ids``, ``attention_mask``), a tensor, or a
    tuple whose first item is the input. Returns the logits (``.logits`` of HF outputs) or the plain output."""
    out = model(**batch) if isinstance(batch, dict) else model(batch[0] if isinstance(batch, (list, tuple)) else batch)
    return out.logits if hasattr(out, "logits") else out


def causal_lm_loss(logits: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                   reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy; padded positions (attention_mask 0) are not predicted."""
    targets = input_ids[:, 1:].clone()  # (B, T-1)
    if attention_mask is not None:
        targets[attention_mask[:, 1:] == 0] = -100
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets.flatten(), ignore_index=-100, reduction=reduction)


# ----------------------------------------------------------------------------- text generation
def causal_lm(model: nn.Module) -> nn.Module:
    """The ``transformers`` causal LM inside ``model`` (itself, a zoo CausalLM's, or a delta's base)."""
    from transformers import GenerationMixin

    for module in model.modules():
        if isinstance(module, GenerationMixin):
            return module
    raise ValueError(f"{type(model).__name__} holds no causal language model; text generation needs one")


def text_tokenizer(model: nn.Module, tokenizer=None, *, source: str | None = None, revision: str | None = None):
    """The tokenizer that feeds ``model``'s vocabulary: ``tokenizer`` (``"bytes"``, a folder / HF repo id, or a
    tokenizer object), else UTF-8 bytes for a 256-token vocabulary (the zoo's byte-level models), else the tokenizer
    of ``source`` (its base, e.g. ``mistralai/Mistral-7B-v0.1``) from a local folder or the Hugging Face cache. Raw
    bytes are refused for a model whose vocabulary is not bytes."""
    from zoo.bitdelta.data import ByteTokenizer, get_tokenizer

    vocab = causal_lm(model).config.vocab_size
    if tokenizer is None:
        if vocab == ByteTokenizer.vocab_size:
            return ByteTokenizer()
        if not source:
            raise ValueError(f"this model's {vocab}-token vocabulary is not bytes and it names no base to take a "
                             "tokenizer from; pass tokenizer=<folder or HF repo id> (--tokenizer)")
        try:
            return get_tokenizer(source, revision=revision)
        except ValueError:
            raise ValueError(
                f"this model reads the {vocab}-token vocabulary of its base {source!r}, whose tokenizer is not "
                "available here (offline and not in the Hugging Face cache?). Pass tokenizer=<folder> (--tokenizer) "
                "holding it, e.g. downloaded on a connected machine with "
                f"`huggingface-cli download {source} tokenizer.json tokenizer_config.json`") from None
    if isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = get_tokenizer(tokenizer)
    if isinstance(tokenizer, ByteTokenizer) and vocab != ByteTokenizer.vocab_size:
        raise ValueError(f"refusing to feed raw bytes to a model with a {vocab}-token vocabulary (not bytes): pass "
                         f"its tokenizer{f' (that of {source!r})' if source else ''} instead")
    return tokenizer


@torch.no_grad()
def generate_text(generate, tokenizer, prompt: str, *, rows: int = 1, max_new_tokens: int = 80,
                  temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                  device: torch.device | str = "cpu") -> list[str]:
    """``rows`` continuations of ``prompt`` (the prompt excluded): ``generate`` is a ``transformers``-style
    ``generate(input_ids, **kwargs)``, e.g. a causal LM's or a multi-tenant server's with its tenants bound.
    Greedy at ``temperature`` 0; otherwise sampled (``top_k`` 0 and ``top_p`` 1 filter nothing) from the global
    torch RNG, seeded with ``seed`` if given."""
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    ids = tokenizer(prompt)["input_ids"]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    special = {"skip_special_tokens": True}
    if not ids:
        raise ValueError("the prompt is empty; give at least one character")
    sampling = ({"do_sample": True, "temperature": temperature, "top_k": top_k, "top_p": top_p} if temperature > 0
                else {"do_sample": False})
    if seed is not None:
        torch.manual_seed(seed)
    input_ids = torch.tensor([ids] * rows, device=device)
    out = generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=max_new_tokens,
                   pad_token_id=pad, **sampling)
    # decode prompt and continuation together, then cut the prompt off: the boundary keeps its spacing (word
    # pieces) and multi-byte characters that straddle it (bytes)
    head = tokenizer.decode(ids, **special)
    texts = [tokenizer.decode(row.tolist(), **special) for row in out]
    return [t[len(head):] if t.startswith(head) else tokenizer.decode(row[len(ids):].tolist(), **special)
            for t, row in zip(texts, out)]


class _Wrapper(ZooModule):
    """A zoo module around ``self.model``, trained on ``_step_loss(batch)`` (by default the causal LM loss; logged as
    train_loss / val_loss)."""

    def forward(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def generate(self, prompt: str, max_new_tokens: int = 80, temperature: float = 0.0, *, top_k: int = 0,
                 top_p: float = 1.0, seed: int | None = None, tokenizer=None) -> str:
        """Continue ``prompt`` (greedy at temperature 0). The zoo's byte-level models read UTF-8 bytes; other
        vocabularies need ``tokenizer`` (see :func:`text_tokenizer`)."""
        lm = causal_lm(self.model)
        return generate_text(lm.generate, self._text_tokenizer(tokenizer), prompt, max_new_tokens=max_new_tokens,
                             temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, device=lm.device)[0]

    def _text_tokenizer(self, tokenizer):
        return text_tokenizer(self, tokenizer)

    def _step_loss(self, batch) -> torch.Tensor:
        """:func:`causal_lm_loss` on a dict of keyword inputs, or on input ids (alone or first in a tuple)."""
        if not isinstance(batch, dict):
            batch = {"input_ids": batch[0] if isinstance(batch, (list, tuple)) else batch}
        return causal_lm_loss(model_logits(self.model, batch), batch["input_ids"], batch.get("attention_mask"))

    def _step(self, hook: str, name: str, batch, batch_idx):
        loss = self._step_loss(batch)
        self.log(name, loss, prog_bar=True)
        return loss

    def training_step(self, batch, batch_idx):
        return self._step("training_step", "train_loss", batch, batch_idx)

    def validation_step(self, batch, batch_idx):
        return self._step("validation_step", "val_loss", batch, batch_idx)


class _SavedAsDelta(_Wrapper):
    """A module saved as the BitDelta it holds (``to_delta()``), never with its base: a ``bitdelta`` repo."""

    saved_hparams: tuple[str, ...] = ()  # training settings the repo keeps beside the delta

    def pretrained_state_dict(self) -> dict[str, torch.Tensor]:
        return self.to_delta().state_dict()

    def save_pretrained(self, directory: str | os.PathLike, *, max_shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[str]:
        """Write the delta repo: packed signs, scales, carried tensors and metadata."""
        keep = {k: self.hparams[k] for k in self.saved_hparams}
        return self.to_delta().save(directory, extra_hparams=keep, max_shard_bytes=max_shard_bytes)

    def model_card_fields(self) -> dict[str, Any]:
        delta, card = self.to_delta(), super().model_card_fields()
        fields = {**card, "paper": PAPER, "tags": sorted(set(card.get("tags", [])) | {"bitdelta", "delta"})}
        if delta.base and not Path(delta.base).expanduser().exists():
            fields["base_model"] = delta.base.removeprefix("hf://")
        fields["description"] = (
            f"A BitDelta (1-bit fine-tune delta) of {len(delta.shapes)} layers against the base `{delta.base}`"
            f"{f' at revision {delta.base_revision}' if delta.base_revision else ''}; {delta.nbytes() / 2**20:.2f} MiB "
            f"of packed signs, scales and {len(delta.params)} full-precision tensors. `zoo.load` fetches the base, "
            f"checks its weights (sha256 {delta.base_sha256 or 'not recorded'}) and applies the delta.")
        return fields


class CausalLM(_Wrapper):
    """A ``transformers`` Llama causal LM as a zoo model: the base and fine-tunes of the zoo's own BitDelta family.

    ``config`` holds ``LlamaConfig`` keyword arguments. Trains with next-token cross-entropy, AdamW and a linear
    warm-up into a cosine decay over ``max_steps``."""

    model_type = "bitdelta-causal-lm"
    method = "bitdelta"

    def __init__(self, config: dict[str, Any], lr: float = 1e-3, weight_decay: float = 0.1, warmup_steps: int = 100,
                 max_steps: int = 10000, min_lr_ratio: float = 0.1, betas: list[float] | None = None):
        super().__init__()
        self.save_hyperparameters()
        from transformers import LlamaConfig, LlamaForCausalLM

        self.model = LlamaForCausalLM(LlamaConfig(**config))

    def reset_nonpersistent_buffers(self, device: torch.device) -> None:
        """RoPE's ``inv_freq`` is not saved: rebuild the rotary embedding on ``device`` after a meta-device load."""
        rotary = self.model.model.rotary_emb
        with torch.device(device):
            self.model.model.rotary_emb = type(rotary)(config=self.model.config)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        # RoPE's inv_freq stays float32 in any dtype, as transformers' from_pretrained(dtype=...) leaves it: a cast
        # would round it, and a BitDelta's base loaded in its own dtype would differ from the one it was made against
        inv_freq = self.model.model.rotary_emb.inv_freq
        if not inv_freq.is_meta and inv_freq.dtype != torch.float32:
            self.reset_nonpersistent_buffers(inv_freq.device)
        return self

    def configure_optimizers(self):
        hp = self.hparams
        optimizer = torch.optim.AdamW(weight_decay_groups(self, hp.weight_decay), lr=hp.lr,
                                      betas=tuple(hp.betas or (0.9, 0.95)))
        return warmup_cosine(optimizer, hp.warmup_steps, hp.max_steps, hp.min_lr_ratio)


class BitDeltaModule(_SavedAsDelta):
    """What ``zoo.load("<delta>")`` returns: the base (a zoo model or a Hugging Face causal LM) with the delta applied,
    merged by default (``merged=False``: the packed-bit forward). The hyperparameters describe the delta; training
    trains it (the scales and the carried tensors), the base stays frozen."""

    model_type = "bitdelta"
    method = "bitdelta"
    saved_hparams = ("lr", "weight_decay", "block_size")  # not "merged": a repo loads merged by default

    def __init__(self, base: str, modules: dict[str, list[int]], params: dict[str, dict[str, Any]] | None = None,
                 base_revision: str | None = None, base_sha256: str | None = None, base_dtype: str = "float32",
                 merged: bool = True, lr: float = 1e-4, weight_decay: float = 0.0, block_size: int = 1024,
                 model: nn.Module | None = None, delta: BitDelta | None = None):
        super().__init__()
        self.save_hyperparameters(ignore=["model", "delta"])
        # rebuilt from hyperparameters alone (a Lightning checkpoint, even under the meta device): load the real
        # base on the CPU and apply an empty delta; the checkpoint's tensors are assigned next
        with torch.device("cpu") if model is None or delta is None else contextlib.nullcontext():
            if delta is None:
                delta = self._empty_delta()
            if model is None:
                model = load_model(base, revision=base_revision, dtype=base_dtype)
                delta.check_base(model)
            model.requires_grad_(False)
            apply_deltas_(model, [delta], merged=merged, block_size=block_size)
        self.model = model
        self.tokenizer_source = base  # where the base (and so its tokenizer) comes from; from_repo_dir may refine it
        self.carried_dtypes = {name: t.dtype for name, t in delta.params.items()}  # as stored in the delta
        self._identity = delta.identity()
        for layer in compressed_layers(model).values():
            layer.scales.requires_grad_(True)
        for name, param in model.named_parameters():
            if name in self.carried_dtypes:
                param.requires_grad_(True)

    def _empty_delta(self) -> BitDelta:
        hp = self.hparams
        state = {n: torch.zeros(p["shape"], dtype=parse_dtype(p["dtype"], floating=False))
                 for n, p in (hp.params or {}).items()}
        for n, (o, i) in hp.modules.items():
            state.update({f"{n}.mask": torch.zeros(-(-i // 32), o, dtype=torch.int32), f"{n}.coeff": torch.zeros(())})
        return BitDelta.from_state_dict(state, hp)

    @classmethod
    def from_repo_dir(cls, directory: Path, hparams: dict[str, Any], *, device: torch.device, dtype: torch.dtype | None,
                      merged: bool | None = None, base: str | os.PathLike | nn.Module | None = None,
                      verify_base: bool = True, block_size: int | None = None) -> "BitDeltaModule":
        """Load the base the delta names (or ``base``: a zoo name, folder, HF id or model), check it, apply the delta."""
        delta = BitDelta.load(directory)
        try:
            base_model = load_model(base if base is not None else delta.base, revision=delta.base_revision,
                                    dtype=delta.base_dtype, relative_to=directory)
        except FileNotFoundError as err:
            if base is not None:
                raise
            raise FileNotFoundError(f"the delta {directory} applies to the base it names, {delta.base!r}, which cannot "
                                    f"be loaded ({err}); put the base there, or load the delta with base=<zoo name, "
                                    "folder or HF repo id> (--base)") from None
        delta.check_base(base_model, verify=verify_base)
        hp = {**hparams, **delta.hparams(), "base": hparams["base"]}
        hp.update((k, v) for k, v in (("merged", merged), ("block_size", block_size)) if v is not None)
        module = cls(**hp, model=base_model, delta=delta)
        module.tokenizer_source = base_source(base, hparams["base"], directory)
        return module.to(device=device, dtype=dtype)

    # ------------------------------------------------------------------ the delta
    def to_delta(self) -> BitDelta:
        state = self.model.state_dict()
        return delta_from_model(self.model, {n: state[n].to(d) for n, d in self.carried_dtypes.items()}, self._identity)

    def store_as_(self, dtype: torch.dtype) -> BitDeltaModule:
        """Save the carried full-precision tensors in ``dtype`` from now on (e.g. bf16 to shrink a delta repo); the
        packed signs and fp32 scales stay as they are."""
        self.carried_dtypes = {n: dtype if d.is_floating_point else d for n, d in self.carried_dtypes.items()}
        return self

    # ------------------------------------------------------------------ running
    def _base_answers(self, name: str) -> bool:
        """Whether the zoo base answers ``name``: a public name ZooModule lacks (EScAIP's ``as_calculator``, chess's
        ``engine``), but no in-place method (``..._``): that would change the base, not the delta."""
        base = self.__dict__.get("_modules", {}).get("model")
        return (isinstance(base, ZooModule) and not name.startswith("_") and not name.endswith("_")
                and not hasattr(ZooModule, name))

    def __getattr__(self, name: str) -> Any:
        """A delta of a zoo model answers as its base does, on the fine-tune's weights (see :meth:`_base_answers`)."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            if not self._base_answers(name):
                raise
            return getattr(self._modules["model"], name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *(n for n in dir(self._modules["model"]) if self._base_answers(n))})

    def generate(self, *args, **kwargs):
        """The fine-tune's ``generate``: a zoo base's own (a CausalLM's text, an RCG stage's images), or for a Hugging
        Face causal LM the text continuation in its base's vocabulary (a Mistral delta offline needs ``tokenizer``)."""
        if self._base_answers("generate") and hasattr(self.model, "generate"):
            return self.model.generate(*args, **kwargs)
        return super().generate(*args, **kwargs)

    def _text_tokenizer(self, tokenizer):  # without one, the base's
        return text_tokenizer(self, tokenizer, source=self.tokenizer_source, revision=self.hparams.base_revision)

    def _step(self, hook: str, name: str, batch, batch_idx):
        if not isinstance(self.model, L.LightningModule):
            return super()._step(hook, name, batch, batch_idx)
        # a zoo base module knows its own loss: run its own step. The Trainer drives this module only, so the inner
        # one's ``self.log`` is routed to ours for the call (an instance attribute shadows the method)
        inner = self.model
        inner.log = self.log
        try:
            return getattr(inner, hook)(batch, batch_idx)
        finally:
            del inner.log

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        for layer in compressed_layers(self.model).values():  # keep merged weights in step with the new scales
            if layer.merged:
                layer.refresh_merged()

    def configure_optimizers(self):
        trainable = [p for p in self.parameters() if p.requires_grad]
        return torch.optim.AdamW(trainable, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)


class ScaleDistillation(_SavedAsDelta):
    """Compress ``finetune`` against ``base`` and distil the scales so that the compressed model's logits match the
    fine-tune's (logit MSE). ``mode="scales"`` trains only α (the paper); ``mode="official"`` reproduces the official
    ``train.py``: α plus every full-precision parameter, AdamW with weight decay 0.01, and no gradient through the
    1-bit branch. ``base`` / ``finetune`` are zoo names, local folders or HF repo ids (or pass loaded models as
    ``base_model`` / ``finetune_model``)."""

    model_type = "bitdelta-distill"
    method = "bitdelta"

    def __init__(self, base: str, finetune: str, select: str | list[str] = "auto", exclude: list[str] | None = None,
                 mode: str = "scales", lr: float = 1e-4, weight_decay: float | None = None,
                 num_steps: int | None = None, dtype: str | None = None, base_revision: str | None = None,
                 finetune_revision: str | None = None, block_size: int = 1024, out_dir: str | None = None,
                 base_model: nn.Module | None = None, finetune_model: nn.Module | None = None):
        super().__init__()
        if mode not in ("scales", "official"):
            raise ValueError(f"mode must be 'scales' (train α only) or 'official' (α and full-precision params), got {mode!r}")
        self.save_hyperparameters(ignore=["base_model", "finetune_model"])
        with torch.device("cpu"):  # real tensors even when a checkpoint loader builds us under the meta device
            base_m, teacher = load_pair(base if base_model is None else base_model,
                                        finetune if finetune_model is None else finetune_model, dtype=dtype,
                                        base_revision=base_revision, finetune_revision=finetune_revision,
                                        note=rank_zero_info)
            delta = compress(base_m, teacher, select=select, exclude=exclude or (), base_name=base,
                             base_revision=base_revision)
            compressed = {f"{n}.weight" for n in delta.shapes}
            # the base's full-precision tensors: a trained tensor is carried only where it ends up different
            self._base_tensors = {k: v.detach().clone() for k, v in base_m.state_dict().items() if k not in compressed}
            student = copy.deepcopy(base_m) if base_m is base_model else base_m  # never change a model passed in
            student.requires_grad_(False)
            apply_deltas_(student, [delta], merged=False, block_size=block_size, grad_through_signs=mode != "official")
            for layer in compressed_layers(student).values():
                layer.scales.requires_grad_(True)
            if mode == "official":  # the official optimizer gets every student parameter; base weights are buffers
                student.requires_grad_(True)
            self.model = student.eval()  # see parts_in_eval_mode()
            self._identity = delta.identity()
            self._new_tensors = [k for k in delta.params if k not in self._base_tensors]
            # a list: not a submodule, so it stays out of checkpoints and the optimizer
            self._teacher = [teacher.requires_grad_(False).eval()]

    @property
    def teacher(self) -> nn.Module:
        return self._teacher[0]

    def parts_in_eval_mode(self) -> list[nn.Module]:
        # the student runs in eval mode (dropout off) as the teacher does, and as in the official train.py: its
        # logits are to match the teacher's, and only α and the carried tensors train
        return [self.model]

    def on_fit_start(self) -> None:
        super().on_fit_start()
        self.teacher.to(self.device)

    def distillation_loss(self, batch) -> torch.Tensor:
        """MSE between student and teacher logits, torch's mean over batch × sequence × vocab (padding included)."""
        with torch.no_grad():
            target = model_logits(self.teacher, batch)
        return F.mse_loss(model_logits(self.model, batch), target)

    _step_loss = distillation_loss

    def configure_optimizers(self):
        hp = self.hparams
        wd = hp.weight_decay if hp.weight_decay is not None else (0.01 if hp.mode == "official" else 0.0)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=hp.lr, weight_decay=wd)
        steps = hp.num_steps or int(self.trainer.estimated_stepping_batches)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def on_train_end(self) -> None:
        if self.hparams.out_dir and self.trainer.is_global_zero:
            self.save_pretrained(self.hparams.out_dir)

    # ------------------------------------------------------------------ the delta
    def to_delta(self) -> BitDelta:
        """The current delta: trained scales, plus every full-precision tensor that differs from the base."""
        state = self.model.state_dict()
        params = {k: state[k] for k, base_value in self._base_tensors.items()
                  if state[k].shape != base_value.shape or not torch.equal(state[k].cpu(), base_value)}
        params.update({k: state[k] for k in self._new_tensors})
        return delta_from_model(self.model, params, self._identity)

    def store_as_(self, dtype: torch.dtype) -> ScaleDistillation:
        raise ConfigError("a distillation checkpoint publishes its delta as trained; publish it first, then "
                          f"`zoo publish DELTA_FOLDER REPO --dtype {str(dtype).removeprefix('torch.')}`")
