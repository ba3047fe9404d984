"""The task API: EScAIP as an ASE calculator (``model.as_calculator()``) for MD and relaxations."""

from __future__ import annotations

import torch
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from ase.stress import full_3x3_to_voigt_6_stress

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
        self.results = self.calculate_many([self.atoms], properties)[0]

    def calculate_many(self, images, properties=("energy", "forces"), max_atoms: int = 4096) -> list[dict]:
        """The results of many structures (an ensemble, replicas, a trajectory's frames) in few forward passes of
        at most ``max_atoms`` atoms (``EScAIPModule.predict_many``): one dict per structure with the keys of
        ``calc.results``. Each equals a ``calculate`` of that structure alone up to float rounding; the
        structures and this calculator's own results are left as they are."""
        want_stress = self._check_stress(properties, images)
        outs = self.module.predict_many(images, stress=want_stress if self.module.model.gradient else None,
                                        max_atoms=max_atoms)
        return [self._ase_results(out, want_stress) for out in outs]

    def _check_stress(self, properties, images) -> bool:
        if "stress" not in properties:
            return False
        if "stress" not in self.implemented_properties:
            raise PropertyNotImplementedError(
                "this EScAIP model predicts forces directly, so it has no stress; use a gradient-force model"
            )
        if not all(atoms.pbc.all() for atoms in images):
            raise PropertyNotImplementedError("stress needs a fully periodic cell (atoms.pbc all True)")
        return True

    @staticmethod
    def _ase_results(out: dict, want_stress: bool) -> dict:
        """One structure's ``predict`` output -> ASE results (float64 numpy; stress in Voigt order)."""
        energy = float(out["energy"])
        results = {"energy": energy, "free_energy": energy}
        if "forces" in out:
            results["forces"] = out["forces"].double().cpu().numpy()
        if want_stress:
            results["stress"] = full_3x3_to_voigt_6_stress(out["stress"].double().cpu().numpy())
        return results
