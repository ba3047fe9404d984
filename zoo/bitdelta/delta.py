"""A BitDelta: the 1-bit difference between a fine-tuned model and its base, and how it is made and stored.

    delta = compress(base, finetune)            # sign bits + one fp32 scale per selected Linear
    delta.save("my-delta")                      # a zoo repo: config.json + model.safetensors
    model = zoo.load("my-delta")                # loads the base named inside, applies the delta

Repo format (``model.safetensors``; the tensor names follow the official ``diff.pt``):

* ``<module>.mask``  int32 (ceil(in/32), out): packed sign bits, layout in :data:`zoo.bitdelta._bits.BIT_ORDER`;
* ``<module>.coeff`` float32, 0-dim: the scale α (initially mean |Δ| in fp32);
* ``<param name>``   a full-precision tensor of the fine-tune, only where it differs from the base.

The safetensors header (:meth:`BitDelta.metadata`) and ``config.json`` both describe the delta and its base, down
to the sha256 of the base weights (:func:`zoo.io.weights_fingerprint`): loading refuses any other base.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from zoo.io import CONFIG_NAME, DEFAULT_SHARD_BYTES, dtype_name, load_state_dict, weight_files, weights_fingerprint
from zoo.io import write_repo
from zoo.bitdelta._bits import BIT_ORDER, SIGN_CONVENTION, pack_signs

__all__ = ["BitDelta", "compress", "check_same_kind", "select_modules", "linear_weight", "is_linear_like",
           "FORMAT_VERSION"]

FORMAT_VERSION = 1
MODEL_TYPE = "bitdelta"
OFFICIAL_RULE = "official"
AUTO_RULE = "auto"


# ----------------------------------------------------------------------------- modules
def is_linear_like(module: nn.Module) -> bool:
    """``nn.Linear`` or transformers' GPT-2 ``Conv1D`` (weight stored as (in, out))."""
    return isinstance(module, nn.Linear) or (type(module).__name__ == "Conv1D" and hasattr(module, "nf"))


def linear_weight(module: nn.Module) -> torch.Tensor:
    """The (out, in) weight of a linear-like module (a view for Conv1D)."""
    return module.weight if isinstance(module, nn.Linear) else module.weight.T


def _official_layers(modules: dict[str, nn.Module], *, strict: bool) -> list[str]:
    """The official rule: every direct child whose name contains ``proj`` of a module whose dotted name contains
    ``mlp`` or ``self_attn``. ``strict``: a selected child that is not linear is an error (else it is skipped)."""
    names: list[str] = []
    for name, module in modules.items():
        if "mlp" in name or "self_attn" in name:
            for child_name, child in module.named_children():
                full = f"{name}.{child_name}" if name else child_name
                if "proj" not in child_name or full in names:
                    continue
                if is_linear_like(child):
                    names.append(full)
                elif strict:
                    raise ValueError(
                        f"the official rule selects {full!r}, a {type(child).__name__}, but only Linear "
                        "layers can be compressed; pass select=[patterns] naming the Linear layers instead")
    return names


def select_modules(model: nn.Module, select: str | Sequence[str] = AUTO_RULE, exclude: Iterable[str] = ()) -> list[str]:
    """Names of the linear layers to compress.

    ``select="official"``: the official rule (:func:`_official_layers`: 7 layers per Llama/Mistral block; embeddings
    and head are carried). ``select="auto"`` (the default, for a model of any method): the official rule's Linear
    layers where it finds any, else every Linear layer. Otherwise ``select`` is a list of shell-style patterns
    (``"*.attn.c_attn"``, ``"*"``) matched against linear layer names. ``exclude`` patterns drop names."""
    modules = dict(model.named_modules())
    if not isinstance(select, str) and len(select) == 1:
        (select,) = select  # ["auto"] (a command line, a config) is the rule's name
    rule = select if select in (OFFICIAL_RULE, AUTO_RULE) else None
    names = _official_layers(modules, strict=rule == OFFICIAL_RULE) if rule else []
    if rule != OFFICIAL_RULE and not names:
        patterns = ["*"] if rule == AUTO_RULE else [select] if isinstance(select, str) else list(select)
        names = [n for n, m in modules.items() if is_linear_like(m) and any(fnmatch.fnmatchcase(n, p) for p in patterns)]
        for pattern in patterns:
            hit = [n for n in modules if fnmatch.fnmatchcase(n, pattern)]
            if hit and not any(is_linear_like(modules[n]) for n in hit):
                raise ValueError(f"pattern {pattern!r} matches only {hit[0]!r} (a {type(modules[hit[0]]).__name__})"
                                 f"{' and others' if len(hit) > 1 else ''}; only Linear layers can be compressed")
    names = [n for n in names if not any(fnmatch.fnmatchcase(n, p) for p in exclude)]
    if not names:
        raise ValueError(
            f"no layer of this {type(model).__name__} matches select={select!r}"
            f"{f' minus exclude={list(exclude)}' if exclude else ''}; pass shell-style patterns such as ['*.mlp.*']")
    return names


@dataclass
class BitDelta:
    """Packed signs and scales per compressed layer, plus the full-precision tensors that changed."""

    masks: dict[str, torch.Tensor]  # module -> int32 (ceil(in/32), out)
    scales: dict[str, torch.Tensor]  # module -> float32 0-dim
    shapes: dict[str, tuple[int, int]]  # module -> (out, in)
    params: dict[str, torch.Tensor] = field(default_factory=dict)  # state-dict name -> fine-tune tensor
    base: str | None = None  # how to load the base: zoo catalog name, local folder or HF repo id
    base_revision: str | None = None
    base_sha256: str | None = None  # weights_fingerprint of the base in base_dtype; None: unknown (official files)
    base_dtype: str = "float32"

    def __post_init__(self) -> None:
        if set(self.masks) != set(self.scales) or set(self.masks) != set(self.shapes):
            raise ValueError("a BitDelta needs a mask, a scale and a shape for every compressed module")
        for name, (out_f, in_f) in self.shapes.items():
            want = (-(-in_f // 32), out_f)
            if tuple(self.masks[name].shape) != want or self.masks[name].dtype != torch.int32:
                raise ValueError(f"{name}: mask must be int32 {want} for a ({out_f}, {in_f}) weight, "
                                 f"got {self.masks[name].dtype} {tuple(self.masks[name].shape)}")
        clash = {f"{m}.{s}" for m in self.masks for s in ("mask", "coeff")} & set(self.params)
        if clash:
            raise ValueError(f"carried tensors {sorted(clash)} collide with mask/coeff names")

    @property
    def modules(self) -> list[str]:
        return list(self.masks)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Flat tensors in the official key style: masks and scales in module order, then the params."""
        state: dict[str, torch.Tensor] = {}
        for name in self.masks:
            state[f"{name}.mask"] = self.masks[name]
            state[f"{name}.coeff"] = self.scales[name].float().reshape(())
        state.update(self.params)
        return state

    def identity(self) -> dict[str, Any]:
        """Which base this delta applies to."""
        return {"base": self.base, "base_revision": self.base_revision, "base_sha256": self.base_sha256,
                "base_dtype": self.base_dtype}

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.state_dict().values())

    def hparams(self) -> dict[str, Any]:
        """The plain-JSON description of this delta: BitDeltaModule's hyperparameters."""
        return {**self.identity(), "modules": {name: list(shape) for name, shape in self.shapes.items()},
                "params": {name: {"shape": list(t.shape), "dtype": dtype_name(t.dtype)}
                           for name, t in self.params.items()}}

    def metadata(self) -> dict[str, str]:
        """The safetensors header metadata (strings only; names sorted, as in ``config.json``)."""
        param_dtypes = sorted({dtype_name(t.dtype) for t in self.params.values()})
        return {
            "zoo_model_type": MODEL_TYPE,
            "bitdelta_format": str(FORMAT_VERSION),
            **{key: value or "" for key, value in self.identity().items()},
            "modules": json.dumps({n: list(s) for n, s in sorted(self.shapes.items())}),
            "params": json.dumps(sorted(self.params)),
            "bit_order": BIT_ORDER,
            "sign_convention": SIGN_CONVENTION,
            "dtypes": json.dumps({"mask": "int32", "coeff": "float32", "params": param_dtypes}),
        }

    # ------------------------------------------------------------------ disk
    def save(self, directory: str | os.PathLike, *, extra_hparams: dict[str, Any] | None = None,
             max_shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[str]:
        """Write a zoo repo folder (``config.json`` + ``model.safetensors``) that ``zoo.load`` turns into the model."""
        config = {"method": "bitdelta", "model_type": MODEL_TYPE, "hparams": self.hparams() | (extra_hparams or {})}
        return write_repo(directory, self.state_dict(), config, max_shard_bytes=max_shard_bytes,
                          metadata=self.metadata())

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "BitDelta":
        """Read a delta repo folder written by :meth:`save`."""
        from safetensors import safe_open

        from zoo.module import read_config

        directory = Path(directory)
        config = read_config(directory / CONFIG_NAME)
        if config["model_type"] != MODEL_TYPE:
            raise ValueError(f"{directory} holds a {config['model_type']!r} model, not a BitDelta")
        with safe_open(str(weight_files(directory)[0]), framework="pt") as f:
            meta = f.metadata() or {}
        version = int(meta.get("bitdelta_format", 0))
        if version != FORMAT_VERSION:
            raise ValueError(f"{directory}: BitDelta format {version} is not supported (this zoo reads {FORMAT_VERSION})")
        return cls.from_state_dict(load_state_dict(directory), config["hparams"])

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor], hparams: dict[str, Any]) -> "BitDelta":
        shapes = {name: (int(o), int(i)) for name, (o, i) in hparams["modules"].items()}
        masks, scales = {}, {}
        for name in shapes:
            try:
                masks[name] = state.pop(f"{name}.mask")
                scales[name] = state.pop(f"{name}.coeff").float().reshape(())
            except KeyError as err:
                raise ValueError(f"the delta lists module {name!r} but has no tensor {err.args[0]!r}") from None
        expected = set(hparams.get("params") or {})
        if set(state) != expected:
            raise ValueError(f"the delta's tensors do not match its config: unexpected {sorted(set(state) - expected)[:5]}, "
                             f"missing {sorted(expected - set(state))[:5]}")
        identity = {key: hparams.get(key) for key in ("base", "base_revision", "base_sha256")}
        return cls(masks=masks, scales=scales, shapes=shapes, params=state, **identity,
                   base_dtype=hparams.get("base_dtype", "float32"))

    def check_base(self, base: nn.Module, *, verify: bool = True) -> None:
        """Raise ValueError unless ``base`` is the model this delta was made from (fingerprint and shapes)."""
        modules = dict(base.named_modules())
        for name, (out_f, in_f) in self.shapes.items():
            module = modules.get(name)
            if module is None or not is_linear_like(module):
                raise ValueError(f"the base model has no Linear layer {name!r}; this delta was made for another architecture")
            if tuple(linear_weight(module).shape) != (out_f, in_f):
                raise ValueError(f"{name}: the base weight is {tuple(linear_weight(module).shape)}, the delta expects "
                                 f"{(out_f, in_f)}; this delta was made for another base")
        if verify and self.base_sha256:
            got = weights_fingerprint(base)
            if got != self.base_sha256:
                raise ValueError(
                    f"the base weights do not match this delta: its base {self.base!r} had sha256 {self.base_sha256}, "
                    f"the given base has {got}. Load the exact base (same checkpoint and dtype {self.base_dtype}), "
                    "e.g. zoo.load(delta, base=<path>), or pass verify_base=False if you know what you are doing")


# ----------------------------------------------------------------------------- compress
def check_same_kind(base: nn.Module, finetune: nn.Module) -> None:
    if type(base) is not type(finetune):
        raise ValueError(f"the fine-tune ({type(finetune).__name__}) is another kind of model than the base "
                         f"({type(base).__name__}); a delta compresses a fine-tune of its own base: pass the base the "
                         "fine-tune was trained from")


@torch.no_grad()
def compress(base: nn.Module, finetune: nn.Module, *, select: str | Sequence[str] = AUTO_RULE,
             exclude: Iterable[str] = (), base_name: str | None = None, base_revision: str | None = None,
             progress: bool = True) -> BitDelta:
    """BitDelta of ``finetune`` against ``base`` (same architecture and dtype: see ``zoo.bitdelta._base.load_pair``).

    Per selected layer: Δ = W_fine − W_base in the models' dtype, bits = (Δ ≥ 0), α = mean |Δ| in fp32. Every
    other tensor of the fine-tune is carried at full precision if it differs from the base's."""
    from tqdm.auto import tqdm

    check_same_kind(base, finetune)
    base_state = base.state_dict()
    ft_modules, base_modules = dict(finetune.named_modules()), dict(base.named_modules())
    names = select_modules(finetune, select, exclude)
    masks, scales, shapes = {}, {}, {}
    for name in names:  # all checked before the progress bar starts
        if name not in base_modules or not is_linear_like(base_modules[name]):
            raise ValueError(f"the base model has no Linear layer {name!r}; base and fine-tune must share an architecture")
        w_ft, w_base = linear_weight(ft_modules[name]), linear_weight(base_modules[name])
        if w_ft.shape != w_base.shape:
            raise ValueError(f"{name}: fine-tune weight {tuple(w_ft.shape)} vs base {tuple(w_base.shape)}; the "
                             "fine-tune has other sizes than this base: pass the base it was trained from")
        if w_ft.dtype != w_base.dtype:
            raise ValueError(f"{name}: fine-tune is {w_ft.dtype} but base is {w_base.dtype}; load both in one dtype "
                             "(the wider of the two: `zoo bitdelta compress` loads them so)")
    for name in tqdm(names, desc="compress", disable=not progress or len(names) < 8):
        w_ft, w_base = linear_weight(ft_modules[name]), linear_weight(base_modules[name])
        delta = w_ft - w_base  # (out, in), rounded to the models' dtype first
        masks[name] = pack_signs(delta)
        scales[name] = delta.float().abs().mean()
        shapes[name] = tuple(delta.shape)

    skip = {f"{n}.weight" for n in names}
    ft_state = finetune.state_dict(keep_vars=True)
    missing = [k for k in base_state if k not in ft_state]
    if missing:
        raise ValueError(f"the fine-tune lacks base tensors {missing[:5]}; base and fine-tune must share an architecture")
    params, seen = {}, set()
    for key, t in ft_state.items():
        if key in skip or id(t) in seen:
            continue
        seen.add(id(t))
        b = base_state.get(key)
        if b is None or b.shape != t.shape or b.dtype != t.dtype or not torch.equal(b, t):
            params[key] = t.detach().clone()
    return BitDelta(masks=masks, scales=scales, shapes=shapes, params=params, base=base_name,
                    base_revision=base_revision, base_sha256=weights_fingerprint(base),
                    base_dtype=dtype_name(linear_weight(base_modules[names[0]]).dtype))
