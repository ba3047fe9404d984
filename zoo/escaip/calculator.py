"""The task API: EScAIP as an ASE calculator (``model.as_calculator()``) for MD and relaxations."""

from __future__ import annotations

import numpy as np
import torch
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from ase.stress import full_3x3_to_voigt_6_stress

from zoo.escaip.data import atoms_to_batch

__all__ = ["EScAIPCalculator"]


class EScAIPCalculator(Calculator):
    """Energy (eV), forces (eV/Å) and, for gradient-force models on fully periodic cells, stress (eV/Å^3).

    Direct-force models predict forces with a head (not -dE/dx), so they offer no stress.
    """

    def __init__(self, module, device: str | torch.device | None = None, **kwargs):
        super().__init__(**kwargs)
        self.module = module.eval()
        self.device = torch.device(device) if device is not None else next(module.parameters()).device
        self.module.to(self.device)
        props = ["energy", "free_energy"]
        if module.cfg.regress_forces:
            props.append("forces")
        if module.model.gradient:
            props.append("stress")
        self.implemented_properties = props

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        want_stress = "stress" in properties
        if want_stress:
            if "stress" not in self.implemented_properties:
                raise PropertyNotImplementedError(
                    "this EScAIP model predicts forces directly, so it has no stress; use a gradient-force model"
                )
            if not self.atoms.pbc.all():
                raise PropertyNotImplementedError("stress needs a fully periodic cell (atoms.pbc all True)")
        batch = atoms_to_batch([self.atoms], self.device)
        with torch.no_grad():
            out = self.module.predict(batch, stress=want_stress if self.module.model.gradient else None)
        energy = float(out["energy"][0])
        self.results = {"energy": energy, "free_energy": energy}
        if "forces" in out:
            self.results["forces"] = out["forces"].detach().double().cpu().numpy()
        if want_stress:
            stress = out["stress"][0].detach().double().cpu().numpy()
            self.results["stress"] = full_3x3_to_voigt_6_stress(np.asarray(stress))
