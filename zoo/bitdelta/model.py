"""The BitDelta network pieces: a 1-bit-delta linear layer, per-tenant tensors, and how a delta is applied."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from zoo.bitdelta._bits import signed_matmul, unpack_signs
from zoo.bitdelta.delta import BitDelta, linear_weight

__all__ = ["BitDeltaLinear", "TenantSwitch", "apply_deltas_", "use_tenants", "delta_from_model", "compressed_layers",
           "unwrap_merged_"]


# ----------------------------------------------------------------------------- tenant routing
def _tenant_of_rows(module: nn.Module, batch: int, device: torch.device) -> torch.Tensor:
    tenants = module.tenants
    if tenants is None:
        raise ValueError("this model serves several tenants: run it inside `with use_tenants(model, tenant_of_row):`")
    if tenants.shape != (batch,):
        raise ValueError(f"use_tenants got {tuple(tenants.shape)} tenant ids for a batch of {batch} rows")
    return tenants.to(device)


def _rows_by_tenant(tenants: torch.Tensor) -> list[tuple[int, torch.Tensor]]:
    return [(int(t), (tenants == t).nonzero().squeeze(1)) for t in tenants.unique().tolist()]


@contextmanager
def use_tenants(model: nn.Module, tenant_of_row: torch.Tensor | Sequence[int]) -> Iterator[None]:
    """Route batch row i to tenant ``tenant_of_row[i]`` in every multi-tenant layer of ``model``."""
    tenants = torch.as_tensor(tenant_of_row, dtype=torch.long)
    layers = [m for m in model.modules() if isinstance(m, (BitDeltaLinear, TenantSwitch))]
    if not layers:
        raise ValueError("use_tenants: this model has no BitDelta layers; build it with apply_deltas_ first")
    for m in layers:
        n = m.num_tenants
        if tenants.numel() and (int(tenants.min()) < 0 or int(tenants.max()) >= n):
            raise ValueError(f"tenant ids must lie in [0, {n}); got {tenants.tolist()}")
        m.tenants = tenants
    try:
        yield
    finally:
        for m in layers:
            m.tenants = None


class BitDeltaLinear(nn.Module):
    """A linear layer (replacing an ``nn.Linear`` or GPT-2 ``Conv1D``) whose fine-tuned weight is W_base + α·S, with
    S ∈ {−1, +1} stored as packed bits. Merged (one tenant), ``weight`` holds W_base + α·S: plain Linear speed.
    Unmerged, y = x·W_baseᵀ + b + α_t·(x·S_tᵀ) for the tenant t of each batch row (see :func:`use_tenants`).

    ``masks`` (T, ceil(in/32), out) int32, ``scales`` (T,) and a (T, out) ``bias`` hold T tenants; the official
    distillation's backward, ``grad_through_signs=False``, passes the α·(x·Sᵀ) branch's gradient to α, not to x."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, masks: torch.Tensor, scales: torch.Tensor, *,
                 merged: bool = False, block_size: int = 1024, grad_through_signs: bool = True):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        if merged and masks.shape[0] != 1:
            raise ValueError("a merged BitDeltaLinear holds one tenant; use merged=False to serve several")
        self.merged, self.block_size, self.grad_through_signs = merged, block_size, grad_through_signs
        self.tenants: torch.Tensor | None = None
        self.register_buffer("masks", masks.to(torch.int32))
        self.scales = nn.Parameter(scales.detach().float().clone())
        if merged:
            weight = weight + self._scaled_signs(0, weight.dtype)
            # the α the merged weight holds; a changed α (training) is folded in lazily by forward
            self.register_buffer("merged_scale", self.scales.detach()[:1].clone())
        self.register_buffer("weight", weight.detach())
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone())

    @property
    def num_tenants(self) -> int:
        return self.masks.shape[0]

    def _scaled_signs(self, tenant: int, dtype: torch.dtype, scale: torch.Tensor | None = None) -> torch.Tensor:
        """(α·S) formed in fp32, then cast: exactly the official reconstruction."""
        scale = self.scales.detach()[tenant] if scale is None else scale
        return (scale * unpack_signs(self.masks[tenant], self.in_features, torch.float32)).to(dtype)

    @torch.no_grad()
    def refresh_merged(self) -> None:
        """Fold a changed α (after an optimizer step) into the merged weight: W += (α_new − α_old)·S."""
        if not torch.equal(self.merged_scale, self.scales.detach()[:1]):
            change = self.scales.detach()[0] - self.merged_scale[0]
            self.weight += self._scaled_signs(0, self.weight.dtype, change)
            self.merged_scale.copy_(self.scales.detach()[:1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, ..., in) -> (B, ..., out)
        # compiled code takes the merged weight as it stands: the check is a host sync that would break its graph
        # (BitDeltaModule folds each training step's α in; an eager call folds in any other change)
        if self.merged and not torch.compiler.is_compiling():
            self.refresh_merged()
        per_tenant_bias = self.bias is not None and self.bias.dim() == 2
        y = F.linear(x, self.weight, None if per_tenant_bias else self.bias)
        tenants = _tenant_of_rows(self, x.shape[0], x.device) if self.num_tenants > 1 or per_tenant_bias else None
        if per_tenant_bias:
            y = y + self.bias[tenants].view(x.shape[0], *[1] * (y.dim() - 2), self.out_features)
        if self.merged:
            if self.training and self.scales.requires_grad:
                # zero in value, but carries dL/dα = sum(dL/dy · x·Sᵀ) to the scale
                y = y + (self.scales[0] - self.scales[0].detach()).to(y.dtype) * self._signed(x.detach(), 0)
            return y
        xs = x if self.grad_through_signs else x.detach()
        if tenants is None:
            return y + self.scales[0].to(y.dtype) * self._signed(xs, 0)
        delta = torch.zeros_like(y)
        for t, rows in _rows_by_tenant(tenants):
            delta = delta.index_copy(0, rows, self.scales[t].to(y.dtype) * self._signed(xs[rows], t))
        return y + delta

    def _signed(self, x: torch.Tensor, tenant: int) -> torch.Tensor:
        return signed_matmul(x, self.masks[tenant], self.in_features, self.block_size)  # x·S_tᵀ

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, tenants={self.num_tenants}, "
                f"merged={self.merged}, bias={self.bias is not None}")


class TenantSwitch(nn.Module):
    """Runs ``module`` once per tenant present in the batch, with that tenant's own full-precision tensors.

    Used for carried tensors (embeddings, norms, ``lm_head``) when several tenants share one base. Outputs of
    different widths (fine-tunes with extra tokens) are padded with the dtype's minimum, as the official demo does."""

    def __init__(self, module: nn.Module, overrides: Sequence[dict[str, torch.Tensor]]):
        super().__init__()
        self.module = module
        self.tenants: torch.Tensor | None = None
        self._names = [{local: f"tenant{t}__{local.replace('.', '__')}" for local in tensors}
                       for t, tensors in enumerate(overrides)]
        for names, tensors in zip(self._names, overrides):
            for local, tensor in tensors.items():
                self.register_buffer(names[local], tensor.detach())

    @property
    def num_tenants(self) -> int:
        return len(self._names)

    def tensors_of(self, tenant: int) -> dict[str, torch.Tensor]:
        return {local: getattr(self, buffer) for local, buffer in self._names[tenant].items()}

    def forward(self, x: torch.Tensor, *args, **kwargs):  # batch-first input
        tenants = _tenant_of_rows(self, x.shape[0], x.device)
        outs = [(rows, functional_call(self.module, self.tensors_of(t), (x[rows], *args), kwargs))
                for t, rows in _rows_by_tenant(tenants)]
        width = max(o.shape[-1] for _, o in outs)
        first = outs[0][1]
        fill = torch.finfo(first.dtype).min if first.is_floating_point() else 0
        out = first.new_full((x.shape[0], *first.shape[1:-1], width), fill)
        for rows, o in outs:
            out[rows, ..., : o.shape[-1]] = o
        return out


# ----------------------------------------------------------------------------- applying deltas
def _owner(model: nn.Module, name: str) -> tuple[nn.Module, str, str]:
    """The module owning state-dict entry ``name``, the module's path and the local tensor name."""
    path, _, local = name.rpartition(".")
    try:
        return (model.get_submodule(path) if path else model), path, local
    except AttributeError:
        raise ValueError(f"the delta carries {name!r}, but the base model has no module {path!r}") from None


def _assign_tensor(model: nn.Module, name: str, value: torch.Tensor) -> None:
    """Replace one parameter/buffer by ``value`` (possibly another shape), keeping tied parameters tied."""
    owner, _, local = _owner(model, name)
    old = getattr(owner, local, None)
    if old is None and local not in owner._parameters and local not in owner._buffers:
        raise ValueError(f"the delta carries {name!r}, which the base model does not have")
    if local in owner._buffers:
        owner._buffers[local] = value.detach().clone().to(old.device if old is not None else value.device)
        return
    new = nn.Parameter(value.detach().clone().to(old.device), requires_grad=old.requires_grad)
    for module in model.modules():  # tied weights (e.g. GPT-2's lm_head) follow the carried tensor
        for pname, p in list(module._parameters.items()):
            if p is old:
                module._parameters[pname] = new
    if isinstance(owner, nn.Embedding) and local == "weight":
        owner.num_embeddings = new.shape[0]
    if isinstance(owner, nn.Linear) and local == "weight":
        owner.out_features, owner.in_features = new.shape


def compressed_layers(model: nn.Module) -> dict[str, BitDeltaLinear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, BitDeltaLinear)}


@torch.no_grad()
def apply_deltas_(model: nn.Module, deltas: Sequence[BitDelta], *, merged: bool = False, block_size: int = 1024,
                  grad_through_signs: bool = True) -> nn.Module:
    """Turn ``model`` (the base) in place into the fine-tune (one delta) or a multi-tenant model (several).

    Compressed layers become :class:`BitDeltaLinear`; carried tensors replace the base's (one delta) or are
    switched per batch row by :class:`TenantSwitch` (several). Returns ``model``."""
    if not deltas:
        raise ValueError("apply_deltas_ needs at least one delta")
    if merged and len(deltas) > 1:
        raise ValueError(f"merged=True builds one fine-tune; {len(deltas)} deltas need merged=False (multi-tenant)")
    first = deltas[0]
    if any(d.shapes != first.shapes for d in deltas):
        raise ValueError("all tenants must compress the same layers with the same shapes to share one base")
    for d in deltas:
        d.check_base(model, verify=False)
    # carried tensors may be stored narrower than the base runs (e.g. bf16 beside an fp32 base): run them in its dtype
    base_dtypes = {k: v.dtype for k, v in model.state_dict().items() if v.is_floating_point()}
    params = [{k: v.to(base_dtypes[k]) if v.is_floating_point() and k in base_dtypes else v for k, v in d.params.items()}
              for d in deltas]
    modules = dict(model.named_modules())
    for name, (out_f, in_f) in first.shapes.items():
        base = modules[name]
        weight = linear_weight(base).detach().contiguous()  # a Conv1D's is a transposed view
        bias = base.bias.detach() if getattr(base, "bias", None) is not None else None
        carried_bias = [p.get(f"{name}.bias") for p in params]
        if any(b is not None for b in carried_bias):
            if bias is None:
                raise ValueError(f"{name}: the delta carries a bias but the base layer has none")
            biases = [b if b is not None else bias for b in carried_bias]
            bias = biases[0] if len(deltas) == 1 else torch.stack(biases)
        masks = torch.stack([d.masks[name] for d in deltas]).to(weight.device)
        scales = torch.stack([d.scales[name].reshape(()) for d in deltas]).to(weight.device)
        layer = BitDeltaLinear(weight, bias, masks, scales, merged=merged, block_size=block_size,
                               grad_through_signs=grad_through_signs)
        model.set_submodule(name, layer.to(weight.device))

    carried = [{k: v for k, v in p.items() if not (k.endswith(".bias") and k[:-5] in first.shapes)} for p in params]
    if len(deltas) == 1:
        for name, value in carried[0].items():
            _assign_tensor(model, name, value)
    else:
        by_module: dict[str, list[dict[str, torch.Tensor]]] = {}
        for t, params in enumerate(carried):
            for name, value in params.items():
                _, path, local = _owner(model, name)
                by_module.setdefault(path, [{} for _ in deltas])[t][local] = value
        for path, overrides in by_module.items():
            owner = model.get_submodule(path) if path else model
            if any(True for _ in owner.children()):
                raise ValueError(f"tenants carry different tensors of {path!r}, which is not a leaf module; "
                                 "only leaf modules (embeddings, norms, heads) can be switched per tenant")
            model.set_submodule(path, TenantSwitch(owner, overrides))
    # HF models: config.vocab_size follows the (carried) output embedding, as the official loader does
    config, get_out = getattr(model, "config", None), getattr(model, "get_output_embeddings", None)
    if hasattr(config, "vocab_size") and callable(get_out) and isinstance(head := get_out(), nn.Linear):
        config.vocab_size = head.weight.shape[0]
    return model


def delta_from_model(model: nn.Module, params: dict[str, torch.Tensor], identity: dict) -> BitDelta:
    """The (single-tenant) delta a model built by :func:`apply_deltas_` now holds, carrying ``params`` (by state-dict
    name); ``identity`` is the applied delta's :meth:`BitDelta.identity`."""
    layers = compressed_layers(model)
    return BitDelta(masks={n: m.masks[0].detach().clone() for n, m in layers.items()},
                    scales={n: m.scales.detach()[0].float().clone() for n, m in layers.items()},
                    shapes={n: (m.out_features, m.in_features) for n, m in layers.items()},
                    params={k: v.detach().clone() for k, v in params.items()}, **identity)


@torch.no_grad()
def unwrap_merged_(model: nn.Module) -> nn.Module:
    """Replace every merged BitDeltaLinear by a plain ``nn.Linear`` holding W_base + α·S (drops the packed bits).

    The result is an ordinary fine-tuned model (e.g. for ``transformers`` ``save_pretrained``); GPT-2 ``Conv1D``
    layers come back as equivalent ``nn.Linear`` layers. Returns ``model``."""
    for name, layer in compressed_layers(model).items():
        if not layer.merged or layer.num_tenants != 1:
            raise ValueError(f"{name} is not merged; load with merged=True (one tenant) before unwrapping")
        layer.refresh_merged()
        linear = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None, device="meta")
        linear.weight = nn.Parameter(layer.weight.clone())
        if layer.bias is not None:
            linear.bias = nn.Parameter(layer.bias.detach().clone())
        model.set_submodule(name, linear)
    return model

