"""The task API: EScAIP as an ASE calculator (``model.as_calculator()``) for MD and relaxations."""

from __future__ import annotations

import torch
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from ase.stress import full_3x3_to_voigt_6_stress

from zoo.escaip.data import atoms_to_batch
from zoo.escaip.graph import SkinCandidates

__all__ = ["EScAIPCalculator"]


class EScAIPCalculator(Calculator):
    """Energy (eV), forces (eV/Å) and, for gradient-force models on fully periodic cells, stress (eV/Å^3).

    Direct-force models predict forces with a head (not -dE/dx), so they offer no stress.

    Successive calls on one structure (MD, relaxations) reuse its neighbour candidates within the search radius
    plus ``skin`` (Å) until an atom has moved more than half the skin (``graph.SkinCandidates``), with the same graph
    as a fresh search. ``compile=True`` runs this calculator's calls through ``torch.compile``
    (``EScAIP.compile_inference``; other calculators of the same model stay eager): about a minute of compiling per
    atom count (seconds from inductor's on-disk cache in a later process), for long MD runs.
    """

    def __init__(self, module, device: str | torch.device | None = None, *, skin: float = 0.5,
                 compile: bool = False, **kwargs):
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
        self.compiled = compile
        self._candidates = SkinCandidates(module.cfg.graph, skin, first_call=compile)
        if compile:
            module.model.compile_inference()  # compiles nothing yet: a missing C++ toolchain is reported here

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        want_stress = self._check_stress(properties, [self.atoms])
        batch = atoms_to_batch([self.atoms], self.device)
        out = self.module.predict(batch, stress=want_stress, candidates=self._candidates, compiled=self.compiled)
        self.results = self._ase_results({key: value if key == "forces" else value[0] for key, value in out.items()},
                                         want_stress)

    def calculate_many(self, images, properties=("energy", "forces"), max_atoms: int = 4096) -> list[dict]:
        """``calc.results`` of many structures (an ensemble, a trajectory's frames) in few batched forward passes
        (``EScAIPModule.predict_many``), each equal to a ``calculate`` of it alone up to float rounding; the
        structures and this calculator's own results are left as they are."""
        want_stress = self._check_stress(properties, images)
        outs = self.module.predict_many(images, stress=want_stress, max_atoms=max_atoms, compiled=self.compiled)
        return [self._ase_results(out, want_stress) for out in outs]

    def _check_stress(self, properties, images) -> bool:
        if "stress" not in properties:
            return False
        if "stress" not in self.implemented_properties:
            raise PropertyNotImplementedError("this EScAIP model predicts forces directly, so it has no stress; "
                                              "use a gradient-force model")
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
