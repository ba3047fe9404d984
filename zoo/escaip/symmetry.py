"""Symmetry report: how far energies are from invariant and forces from equivariant.

As the authors' ``check_model_equivariance.py``: for random rotations of four kinds (uniform random rotation matrices
and rotations about x, y, z by a random angle), compare E(R x) with E(x) and F(R x) with R F(x), reporting MAE, maximum
error and cosine similarity; random translations likewise. Direct-force models are not equivariant by design (their
force head multiplies learned scalars with the Cartesian components of edge directions); gradient forces are.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from zoo.escaip.data import atoms_to_batch

__all__ = ["default_structures", "random_rotation", "symmetry_report", "format_report"]

KINDS = ("random", "x", "y", "z")
# how an error sums up over the transforms: maxima by the largest, the cosine by the smallest, the rest by the mean
_REDUCE = {"force_cos": np.min,
           **dict.fromkeys(("energy_max", "energy_max_per_atom", "force_max", "force_scale"), np.max)}


def default_structures(supported: set[int]) -> list:
    """Molecules (no PBC, as the authors check) and a periodic slab; only those of ``supported`` elements."""
    from ase.build import add_adsorbate, fcc111, molecule

    structures = [molecule(name) for name in ("CH3CH2OH", "C6H6", "H2O", "CH3COOH")]
    slab = fcc111("Cu", (3, 3, 3), vacuum=6.0, periodic=True)
    add_adsorbate(slab, "O", 1.2, "fcc")
    slab.rattle(0.05, seed=0)
    structures.append(slab)
    return [a for a in structures if set(a.numbers.tolist()) <= supported]


def random_rotation(kind: str, rng: np.random.Generator) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    if kind == "random":  # a normal 4-vector, normalised: a uniformly random unit quaternion (scipy: scalar last)
        w, x, y, z = rng.normal(size=4)
        return Rotation.from_quat([x, y, z, w]).as_matrix()
    return Rotation.from_euler(kind, rng.uniform(0, 2 * math.pi)).as_matrix()


def _predict(model, atoms_list) -> tuple[np.ndarray, np.ndarray | None]:
    out = model.predict(atoms_to_batch(atoms_list, next(model.parameters()).device))  # detached
    forces = out.get("forces")
    return out["energy"].cpu().numpy(), None if forces is None else forces.double().cpu().numpy()


def _compare(e0, f0, e1, f1, natoms) -> dict[str, float]:
    row = {"energy_mae": float(np.mean(np.abs(e1 - e0))), "energy_max": float(np.max(np.abs(e1 - e0))),
           "energy_max_per_atom": float(np.max(np.abs(e1 - e0) / natoms))}
    if f0 is not None:
        cos = np.sum(f0 * f1, 1) / np.maximum(np.linalg.norm(f0, axis=1) * np.linalg.norm(f1, axis=1), 1e-12)
        row.update(force_mae=float(np.mean(np.abs(f1 - f0))), force_max=float(np.max(np.abs(f1 - f0))),
                   force_cos=float(np.mean(cos)), force_scale=float(np.max(np.abs(f0))))
    return row


def symmetry_report(model, structures=None, *, n_rotations: int = 32, n_translations: int = 8,
                    seed: int = 0) -> dict[str, Any]:
    """Errors of E(R x) vs E(x) and F(R x) vs R F(x) per rotation kind, and under translations."""
    if structures is None:
        supported = {int(z) for z in torch.nonzero(model.scaling.supported_elements).flatten()}
        structures = default_structures(supported)
    if not structures:
        raise ValueError("no test structure uses only elements this model supports; pass structures explicitly")
    rng = np.random.default_rng(seed)
    natoms = np.array([len(a) for a in structures])
    e0, f0 = _predict(model, structures)
    report: dict[str, Any] = {"structures": [a.get_chemical_formula() for a in structures],
                              "n_rotations": n_rotations, "n_translations": n_translations}

    def summary(transforms) -> dict[str, float]:
        rows = []
        for rot, shift in transforms:
            moved = [a.copy() for a in structures]
            for a, b in zip(structures, moved):
                b.positions, b.cell = a.positions @ rot.T + shift, a.cell.array @ rot.T
            e1, f1 = _predict(model, moved)
            rows.append(_compare(e0, None if f0 is None else f0 @ rot.T, e1, f1, natoms))
        return {key: float(_REDUCE.get(key, np.mean)([r[key] for r in rows])) for key in rows[0]}

    report["rotation"] = {kind: summary((random_rotation(kind, rng), 0.0) for _ in range(n_rotations)) for kind in KINDS}
    report["translation"] = summary((np.eye(3), rng.uniform(-5, 5, size=3)) for _ in range(n_translations))
    return report


def format_report(report: dict[str, Any]) -> str:
    cols = ["energy_mae", "energy_max", "energy_max_per_atom", "force_mae", "force_max", "force_cos"]
    present = [c for c in cols if c in report["translation"]]
    lines = [f"structures: {', '.join(report['structures'])}",
             f"{report['n_rotations']} rotations per kind, {report['n_translations']} translations; "
             "energies in eV, forces in eV/Å (force_cos: the worst mean cosine)",
             "  ".join(["transform".ljust(16)] + [c.rjust(19) for c in present])]
    rows = [(f"rotation {k}", v) for k, v in report["rotation"].items()] + [("translation", report["translation"])]
    for name, values in rows:
        lines.append("  ".join([name.ljust(16)] + [f"{values[c]:19.3e}" for c in present]))
    if "force_scale" in report["translation"]:
        lines.append(f"largest force component: {report['translation']['force_scale']:.3g} eV/Å")
    return "\n".join(lines)
