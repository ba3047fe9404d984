"""Measure a conservative (gradient-force) EScAIP model on molecules it never saw, as its model card reports.

* the g2 test set: 500 K GFN2-xTB Langevin MD of every closed-shell H/C/N/O/F molecule of ASE's ``g2``
  collection (``zoo escaip make-data OUT --g2``), per molecule: force MAE (meV/Å), energy MAE (meV/atom),
  the largest net force |Σ F| (eV/Å); a parity plot of force components;
* a QM9 validation split (molecules held out of training by block), the same metrics averaged;
* NVE (velocity Verlet) MD of ethanol at 300 K: drift of the total energy (meV/atom/ps, a linear fit);
* BFGS relaxations of g2 molecules to fmax 0.05 eV/Å: steps taken, and the xTB force on the relaxed geometry;
* cell relaxations (FrechetCellFilter, stress) of the EMT bulk metals from a 3% expanded lattice: the lattice
  constant against EMT's own;
* speed: atoms/s of energy + forces for a batch of g2 frames, one thread.

    python scripts/eval_escaip_g2.py MODEL data/escaip-g2 --val data/escaip-qm9/qm9/m00000 --out eval/
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from ase import units
from ase.build import bulk
from ase.filters import FrechetCellFilter
from ase.md.velocitydistribution import Stationary, ZeroRotation, thermalize_momenta
from ase.md.verlet import VelocityVerlet
from ase.optimize import BFGS
from eval_escaip_xtb import parity_plot, system_metrics, table
from tqdm.auto import tqdm

import zoo
from zoo.escaip.data import collate_atoms, read_structures
from zoo.escaip.make_data import METALS, build_system

RELAXED = ("CH3CH2OH", "C6H6", "CH3COOH", "C5H5N", "C4H4O", "CH3CONH2", "CH3NO2", "HCF3", "N2H4", "CH3CN")


def internal_temperature(atoms) -> float:
    """Over the 3N - 6 internal degrees of freedom of a (non-linear) molecule at rest."""
    return 2 * atoms.get_kinetic_energy() / ((3 * len(atoms) - 6) * units.kB)


def thermalize_internal(atoms, temperature: float, seed: int) -> None:
    """Seeded velocities with no translation or rotation, the internal degrees of freedom at exactly 2 x
    ``temperature`` (equipartition with the potential energy brings them to about ``temperature``)."""
    thermalize_momenta(atoms, temperature_K=2 * temperature, rng=np.random.default_rng(seed))
    Stationary(atoms)
    ZeroRotation(atoms)
    atoms.set_momenta(atoms.get_momenta() * np.sqrt(2 * temperature / internal_temperature(atoms)))


def nve_drift(model, name: str, picoseconds: float, temperature: float, seed: int) -> dict:
    """NVE of a (non-linear) molecule from its relaxed geometry, its internal degrees of freedom at 2 x
    ``temperature`` so that equipartition with the potential energy brings them to about ``temperature``.

    Temperatures are counted over the 3N - 6 internal degrees of freedom: translation and rotation are removed
    and stay zero, and counting them (as ``Atoms.get_temperature`` does) would report a colder molecule.
    """
    atoms = build_system("g2", name)
    atoms.calc = model.as_calculator()
    BFGS(atoms, logfile=None).run(fmax=0.05, steps=300)
    thermalize_internal(atoms, temperature, seed)
    timestep_fs = 0.5
    dyn = VelocityVerlet(atoms, timestep=timestep_fs * units.fs)
    times, energies, temps = [], [], []
    for _ in tqdm(range(int(round(picoseconds * 1000 / timestep_fs)) // 20), desc=f"{name} NVE", leave=False):
        dyn.run(20)
        times.append(dyn.get_time() / (1000 * units.fs))
        energies.append(atoms.get_total_energy())
        temps.append(internal_temperature(atoms))
    per_atom = (np.array(energies) - energies[0]) / len(atoms)
    return {"nve_molecule": name, "nve_ps": picoseconds, "nve_timestep_fs": timestep_fs,
            "nve_target_temperature_K": temperature, "nve_mean_temperature_K": float(np.mean(temps)),
            "nve_drift_meV_per_atom_per_ps": 1e3 * float(np.polyfit(times, per_atom, 1)[0]),
            "nve_max_deviation_meV_per_atom": 1e3 * float(np.abs(per_atom).max())}


def relaxations(model, names, fmax: float = 0.05, steps: int = 500) -> list[dict]:
    from tblite.ase import TBLite

    rows = []
    for name in names:
        atoms = build_system("g2", name)
        atoms.calc = model.as_calculator()
        opt = BFGS(atoms, logfile=None)
        converged = bool(opt.run(fmax=fmax, steps=steps))
        probe = atoms.copy()
        probe.calc = TBLite(method="GFN2-xTB", verbosity=0)
        rows.append({"molecule": name, "converged": converged, "steps": opt.nsteps,
                     "xtb_fmax_at_relaxed_eV_per_A": float(np.linalg.norm(probe.get_forces(), axis=1).max())})
    return rows


def cell_relaxations(model, metals=METALS) -> list[dict]:
    from ase.calculators.emt import EMT

    def relaxed_a(calc, metal):
        atoms = bulk(metal, "fcc", cubic=True)
        atoms.set_cell(atoms.cell * 1.03, scale_atoms=True)
        atoms.calc = calc
        opt = BFGS(FrechetCellFilter(atoms), logfile=None)
        converged = bool(opt.run(fmax=0.005, steps=300))
        return float(atoms.cell.lengths().mean()), converged, opt.nsteps

    rows = []
    for metal in metals:
        a_model, converged, steps = relaxed_a(model.as_calculator(), metal)
        a_emt, _, _ = relaxed_a(EMT(), metal)
        rows.append({"metal": metal, "converged": converged, "steps": steps, "a_model_A": a_model, "a_emt_A": a_emt,
                     "a_error_percent": 100 * (a_model - a_emt) / a_emt})
    return rows


def speed(model, samples, repeats: int = 3) -> float:
    torch.set_num_threads(1)
    batch = collate_atoms(samples)
    model.predict(batch)
    t0 = time.perf_counter()
    for _ in range(repeats):
        model.predict(batch)
    return repeats * int(batch["natoms"].sum()) / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="zoo model name or folder")
    parser.add_argument("g2", help="the folder of `zoo escaip make-data OUT --g2`")
    parser.add_argument("--val", nargs="*", default=[], help="QM9 validation block folders")
    parser.add_argument("--out", default="eval-escaip-g2")
    parser.add_argument("--md-ps", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model = zoo.load(args.model)
    rows, preds, refs, net = [], [], [], {}
    systems = sorted(p for p in (Path(args.g2) / "g2").iterdir() if p.is_dir())
    with torch.no_grad():
        for system in tqdm(systems, desc="g2"):
            samples = read_structures([system])
            row, pred, ref = system_metrics(model, samples)
            forces = pred.reshape(-1, 3)
            starts = np.cumsum([0] + [len(s["atomic_numbers"]) for s in samples])
            net[system.name] = float(max(np.abs(forces[a:b].sum(0)).max() for a, b in zip(starts[:-1], starts[1:])))
            rows.append({"system": system.name, **row, "max_net_force_eV_per_A": net[system.name]})
            preds.append(pred)
            refs.append(ref)
        val = system_metrics(model, read_structures(args.val))[0] if args.val else None
        atoms_per_s = speed(model, read_structures(systems[:20]))
    force = [r["force_mae_meV_per_A"] for r in rows]
    overall = {
        "g2_molecules": len(rows),
        "g2_force_mae_meV_per_A": float(np.mean(force)),
        "g2_worst_force_mae_meV_per_A": float(np.max(force)),
        "g2_worst_molecule": rows[int(np.argmax(force))]["system"],
        "g2_energy_mae_meV_per_atom": float(np.mean([r["energy_mae_meV_per_atom"] for r in rows])),
        "g2_max_net_force_eV_per_A": float(max(net.values())),
        "qm9_val": val,
        "atoms_per_s_1_thread": atoms_per_s,
    }
    md = nve_drift(model, "CH3CH2OH", args.md_ps, 300.0, args.seed)
    relaxed = relaxations(model, RELAXED)
    cells = cell_relaxations(model)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"overall": overall, "nve": md, "bfgs": relaxed, "cell_relaxation": cells, "g2": rows}
    (out / "metrics.json").write_text(json.dumps(report, indent=2))
    parity_plot({f"g2 test set ({len(rows)} molecules, 500 K xTB MD)": (np.concatenate(refs), np.concatenate(preds))},
                out / "force_parity.png")
    print("g2 test set\n" + table(rows))
    print(json.dumps({k: v for k, v in report.items() if k != "g2"}, indent=2))


if __name__ == "__main__":
    main()
