"""``EScAIPModule``: the EScAIP potential as a LightningModule (training, metrics, EMA, physical predictions).

The network predicts normalised quantities. Physical values are ``raw * rmsd + mean`` plus, for the energy,
the per-element linear references summed over atoms (fairchem's Normalizer + ElementReferences): buffers,
fitted on the training data once, that travel with the weights (safetensors, Lightning checkpoints).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor

from zoo.escaip.graph import batch_index
from zoo.escaip.model import CONFIGS, EScAIP, EScAIPConfig
from zoo.lightning_compat import EMA_CHECKPOINT_KEY, EMAWeights
from zoo.module import ZooModule
from zoo.schedules import warmup_cosine
from zoo.training import weight_decay_groups

__all__ = ["EScAIPModule", "TargetScaling", "default_heads", "chemical_symbol"]


def default_heads(backbone: dict[str, Any]) -> dict[str, dict[str, str]]:
    """fairchem's head layout for a backbone: energy + direct forces, or one gradient energy/force/stress head."""
    cfg = EScAIPConfig.from_dict(backbone)
    if cfg.gradient_forces:
        return {"efs": {"module": "EScAIP_grad_energy_force_stress_head"}}
    heads = {"energy": {"module": "EScAIP_energy_head"}}
    if cfg.regress_forces:
        heads["forces"] = {"module": "EScAIP_direct_force_head"}
    return heads


def chemical_symbol(z: int) -> str:
    from ase.data import chemical_symbols

    return chemical_symbols[z] if 0 <= z < len(chemical_symbols) else f"Z={z}"


class TargetScaling(nn.Module):
    """Normaliser constants and element references, kept in float64 whatever dtype the model is cast to."""

    def __init__(self, max_num_elements: int):
        super().__init__()
        f64 = dict(dtype=torch.float64)
        self.register_buffer("element_references", torch.zeros(max_num_elements, **f64))
        self.register_buffer("energy_mean", torch.zeros((), **f64))
        self.register_buffer("energy_rmsd", torch.ones((), **f64))
        self.register_buffer("forces_rmsd", torch.ones((), **f64))
        self.register_buffer("stress_rmsd", torch.ones((), **f64))
        self.register_buffer("supported_elements", torch.ones(max_num_elements, dtype=torch.bool))
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))

    def _apply(self, fn, recurse=True):
        before = dict(self._buffers)
        super()._apply(fn, recurse)
        for name, buf in self._buffers.items():  # undo dtype casts: energies need float64 sums
            if buf is not None and buf.is_floating_point() and buf.dtype != torch.float64:
                # the float64 values themselves, moved: a round trip through the cast dtype would round them
                source = before[name] if before[name].dtype == torch.float64 else buf
                self._buffers[name] = source.to(buf.device, torch.float64)
        return self

    def reference_energy(self, atomic_numbers: Tensor, natoms: Tensor) -> Tensor:
        """The element references summed per system: (G,) float64."""
        refs = self.element_references[atomic_numbers]
        return refs.new_zeros(len(natoms)).index_add(0, batch_index(natoms), refs)

    def set_(self, **values) -> None:
        """Set the buffers named (``energy_rmsd=...``; None keeps one) and mark the constants fitted."""
        with torch.no_grad():
            for name, value in values.items():
                if value is not None:
                    buf = self.get_buffer(name)
                    buf.copy_(torch.as_tensor(np.asarray(value), dtype=buf.dtype, device=buf.device))
            self.fitted.fill_(True)


class EScAIPModule(ZooModule):
    """EScAIP potential. ``backbone``: fairchem ``EScAIPBackbone`` kwargs (or a preset name in ``CONFIGS`` plus
    overrides via ``backbone={"preset": "small", ...}``); ``heads``: fairchem head specs (default per backbone).

    Losses (in normalised units, as fairchem): per-atom energy MAE, per-atom force L2 norm, stress MAE.
    """

    model_type = "escaip"
    method = "escaip"

    def __init__(self, backbone: dict[str, Any] | None = None, heads: dict[str, dict[str, Any]] | None = None,
                 energy_coef: float = 1.0, force_coef: float = 10.0, stress_coef: float = 1.0, lr: float = 4e-4,
                 weight_decay: float = 1e-3, warmup_steps: int = 100, min_lr_ratio: float = 0.01,
                 ema_decay: float = 0.999, fit_references: bool = True):
        super().__init__()
        backbone = dict(backbone or {"preset": "tiny"})
        preset = backbone.pop("preset", None)
        if preset is not None:
            if preset not in CONFIGS:
                raise ValueError(f"unknown EScAIP preset {preset!r}; choose from {sorted(CONFIGS)}")
            backbone = {**CONFIGS[preset], **backbone}
        backbone = EScAIPConfig.from_dict(backbone).to_dict()  # resolve every default into the saved config
        heads = heads or default_heads(backbone)
        self.save_hyperparameters()  # reads the resolved `backbone` and `heads` above
        self.model = EScAIP(backbone, heads)
        self.scaling = TargetScaling(self.model.cfg.max_num_elements)

    @property
    def cfg(self) -> EScAIPConfig:
        return self.model.cfg

    def architecture(self) -> dict[str, Any]:
        return self.cfg.to_dict()

    # ------------------------------------------------------------------ inference
    def check_inputs(self, batch: dict[str, Tensor]) -> None:
        """One clear error for inputs this potential cannot evaluate."""
        natoms = batch["natoms"]
        if len(natoms) == 0 or int(natoms.sum()) == 0:
            raise ValueError("empty input: there are no atoms to evaluate")
        if (natoms <= 0).any():
            g = int(torch.nonzero(natoms <= 0)[0])
            raise ValueError(f"system {g} has no atoms; remove empty systems from the batch")
        pos, cell = batch["pos"], batch["cell"]
        if not torch.isfinite(pos).all():
            i = int(torch.nonzero(~torch.isfinite(pos).all(1))[0])
            raise ValueError(f"atom {i} has a non-finite position (NaN or inf); check the structure's coordinates")
        if not torch.isfinite(cell).all():
            raise ValueError("the cell holds NaN or inf; give a finite 3x3 cell")
        z = batch["atomic_numbers"]
        bad = (z < 1) | (z >= self.cfg.max_num_elements)
        if bad.any():
            zi, top = int(z[bad][0]), self.cfg.max_num_elements - 1
            raise ValueError(f"atomic number {zi} is outside this model's element range 1..{top}")
        unsupported = ~self.scaling.supported_elements.to(z.device)[z]
        if unsupported.any():
            missing = sorted({int(v) for v in z[unsupported]})
            known = [chemical_symbol(int(v)) for v in torch.nonzero(self.scaling.supported_elements).flatten()]
            raise ValueError(f"element(s) {', '.join(chemical_symbol(v) for v in missing)} were not in this model's "
                             f"training data; it supports {', '.join(known)}")

    def predict(self, batch: dict[str, Tensor], *, stress: bool | None = None, candidates=None,
                compiled: bool = False) -> dict[str, Tensor]:
        """Physical predictions (detached): energy (G,) float64 in eV, forces (N, 3) eV/Å, stress (G, 3, 3) eV/Å^3.
        ``candidates``: a ``graph.SkinCandidates`` kept across calls on the same systems (MD); ``compiled``: see
        ``EScAIP.forward``."""
        self.check_inputs(batch)
        return self._predict_valid(batch, stress=stress, table=None if candidates is None else candidates(batch),
                                   compiled=compiled)

    def predict_many(self, images: Sequence, *, stress: bool | None = None,
                     max_atoms: int = 4096, compiled: bool = False) -> list[dict[str, Tensor]]:
        """``predict`` of many ``ase.Atoms`` in few forward passes (each of at most ``max_atoms`` atoms, bounding
        memory; a larger structure goes alone): one dict per structure, energy () float64 in eV, forces (n, 3)
        eV/Å, stress (3, 3) eV/Å^3, equal to a ``predict`` of that structure alone up to float rounding.
        ``compiled``: through ``EScAIP.compile_inference`` (one compile per batch shape: for the same ensemble
        again and again)."""
        from zoo.escaip.data import atoms_to_sample, collate_atoms, pack_by_atoms

        device = next(self.parameters()).device
        samples = [atoms_to_sample(atoms, require_labels=False) for atoms in images]
        self.check_inputs(collate_atoms(samples))  # once, for all: errors name the system's index
        results: list[dict[str, Tensor]] = []
        for group in pack_by_atoms(range(len(samples)), [len(s["pos"]) for s in samples], max_atoms):
            part = {key: value.to(device) for key, value in collate_atoms([samples[i] for i in group]).items()}
            out = self._predict_valid(part, stress=stress, compiled=compiled)
            if "forces" in out:  # per atom: one (n, 3) piece per structure
                out["forces"] = out["forces"].split(part["natoms"].tolist())
            results += [{key: value[g] for key, value in out.items()} for g in range(len(group))]
        return results

    def _predict_valid(self, batch: dict[str, Tensor], *, stress: bool | None, table=None,
                       compiled: bool = False) -> dict[str, Tensor]:
        """``table``: the batch's neighbour candidates if known (``zoo.escaip.graph.nearest_candidates``);
        ``compiled``: see ``EScAIP.forward``."""
        with torch.no_grad():  # gradient models switch autograd back on inside for -dE/dx
            raw = self.model(batch["pos"], batch["atomic_numbers"], batch["cell"], batch["pbc"], batch["natoms"],
                             stress=stress, table=table, compiled=compiled)
            return self._to_physical({k: v.detach() for k, v in raw.items()}, batch)

    def _to_physical(self, raw: dict[str, Tensor], batch: dict[str, Tensor]) -> dict[str, Tensor]:
        s = self.scaling
        out = {"energy": raw["energy"].double() * s.energy_rmsd + s.energy_mean
               + s.reference_energy(batch["atomic_numbers"], batch["natoms"])}
        if "forces" in raw:
            out["forces"] = raw["forces"] * s.forces_rmsd.to(raw["forces"].dtype)
        if "stress" in raw:
            out["stress"] = raw["stress"] * s.stress_rmsd.to(raw["stress"].dtype)
        return out

    def forward(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        return self.predict(batch)

    def as_calculator(self, **kwargs):
        """An ASE calculator (energy, forces, and stress for gradient models on periodic cells)."""
        from zoo.escaip.calculator import EScAIPCalculator

        return EScAIPCalculator(self, **kwargs)

    def as_torchsim_model(self, **kwargs):
        """This potential as a TorchSim model (``pip install "lightning-zoo[torchsim]"``): batched MD of many
        systems with ``torch_sim``'s integrators (options: ``EScAIPTorchSimModel``)."""
        from zoo.escaip.torchsim import EScAIPTorchSimModel

        return EScAIPTorchSimModel(self, **kwargs)

    # ------------------------------------------------------------------ training
    def setup(self, stage: str) -> None:
        if stage == "fit" and self.hparams.fit_references and not bool(self.scaling.fitted):
            target_scaling = getattr(self.trainer.datamodule, "target_scaling", None)
            if target_scaling is None:
                raise ValueError("fit_references=True needs a datamodule that fits element references and "
                                 "normalisation on its training set (zoo.escaip.data.EScAIPDataModule.target_scaling); "
                                 "pass fit_references=False to train without")
            self.scaling.set_(**target_scaling(self.cfg.max_num_elements))
        if hasattr(self, "val_force_cos"):  # the metrics of an earlier stage's setup
            return
        import torchmetrics

        for split in ("train", "val"):
            setattr(self, f"{split}_energy_mae", torchmetrics.MeanAbsoluteError())
            setattr(self, f"{split}_force_mae", torchmetrics.MeanAbsoluteError())
            # a running mean of the per-atom cosine: CosineSimilarity keeps every force of the epoch (slower each step)
            setattr(self, f"{split}_force_cos", torchmetrics.MeanMetric())

    def _normalised_targets(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        s = self.scaling
        dtype = next(self.model.parameters()).dtype
        ref = s.reference_energy(batch["atomic_numbers"], batch["natoms"])
        return {"energy": ((batch["energy"].double() - ref - s.energy_mean) / s.energy_rmsd).to(dtype),
                "forces": (batch["forces"].double() / s.forces_rmsd).to(dtype),
                "stress": (batch["stress"].double() / s.stress_rmsd).to(dtype)}

    def _step(self, batch: dict[str, Tensor], split: str) -> Tensor:
        p = self.hparams
        use_stress = p.stress_coef > 0 and bool(batch["has_stress"].any()) and self.model.gradient
        raw = self.model(batch["pos"], batch["atomic_numbers"], batch["cell"], batch["pbc"], batch["natoms"],
                         stress=use_stress, create_graph=split == "train")
        target = self._normalised_targets(batch)
        natoms = batch["natoms"]
        loss_e = ((raw["energy"] - target["energy"]).abs() / natoms).mean()
        loss = p.energy_coef * loss_e
        logs = {f"{split}/loss_energy": loss_e}
        if "forces" in raw:
            loss_f = (raw["forces"] - target["forces"]).norm(dim=-1).mean()
            loss = loss + p.force_coef * loss_f
            logs[f"{split}/loss_forces"] = loss_f
        if use_stress:
            has = batch["has_stress"]
            loss_s = (raw["stress"][has] - target["stress"][has]).abs().mean()
            loss = loss + p.stress_coef * loss_s
            logs[f"{split}/loss_stress"] = loss_s
        logs[f"{split}/loss"] = loss

        phys = self._to_physical({k: v.detach() for k, v in raw.items()}, batch)
        energy_mae = getattr(self, f"{split}_energy_mae")
        energy_mae(phys["energy"] / natoms, batch["energy"].double() / natoms)
        logs[f"{split}/energy_mae_per_atom"] = energy_mae
        if "forces" in phys:
            force_mae, force_cos = getattr(self, f"{split}_force_mae"), getattr(self, f"{split}_force_cos")
            pred, true = phys["forces"].contiguous(), batch["forces"].to(phys["forces"].dtype).contiguous()
            force_mae(pred.reshape(-1), true.reshape(-1))
            force_cos(torch.nn.functional.cosine_similarity(pred, true, dim=-1))
            logs[f"{split}/force_mae"] = force_mae
            logs[f"{split}/force_cos"] = force_cos
        self.log_dict(logs, batch_size=len(natoms), on_step=split == "train", on_epoch=True,
                      prog_bar=split == "val", sync_dist=split == "val")
        return loss

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def configure_optimizers(self):
        p = self.hparams
        groups = weight_decay_groups(self.model, p.weight_decay, no_decay=("*embedding*",))
        optimizer = torch.optim.AdamW(groups, lr=p.lr)
        total = max(1, int(self.trainer.estimated_stepping_batches))
        warmup = min(p.warmup_steps, max(total // 10, 1))
        return warmup_cosine(optimizer, warmup, total, p.min_lr_ratio)

    # ------------------------------------------------------------------ EMA of weights
    def configure_callbacks(self):
        return [EMAWeights(self.hparams.ema_decay)] if self.hparams.ema_decay else []

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Checkpoints written before ``EMAWeights`` keep the raw weights as ``state_dict`` and the EMA beside them
        under ``escaip_ema`` (a run trained then is resumed or published now): rewrite them to its layout."""
        legacy = checkpoint.pop("escaip_ema", None)
        if legacy:
            state = checkpoint["state_dict"]
            checkpoint[EMA_CHECKPOINT_KEY] = {"raw": {n: state[f"model.{n}"] for n in legacy},
                                              "num_updates": checkpoint.get("global_step", 0)}
            state.update({f"model.{n}": t for n, t in legacy.items()})

    def weights_from_checkpoint_(self, checkpoint: dict[str, Any]) -> None:
        """Called by ``ZooModule.from_checkpoint`` (``zoo publish``) after the checkpoint's state dict is assigned:
        a legacy checkpoint's weights are its EMA, as ``save_pretrained`` after ``fit`` wrote them."""
        if "escaip_ema" in checkpoint:
            self.on_load_checkpoint(checkpoint)
            self.load_weights_(checkpoint["state_dict"])

    def model_card_fields(self) -> dict[str, Any]:
        fields = super().model_card_fields()
        fields["tags"] += ["interatomic-potential", "ase"]
        return fields
