"""`make demo`: load the zoo's bundled default models and put them to work.

* Metal surfaces: ``escaip-tiny-emt``, an EScAIP interatomic potential trained in the zoo on EMT-labelled metal
  slabs. With the model as the ASE calculator, the demo relaxes an O atom on Cu(111), runs Langevin molecular
  dynamics from there, and checks each stretch of the trajectory against EMT, the reference the model learned.
* Molecules: ``escaip-qm9-xtb``, a conservative EScAIP (forces are gradients of the energy) trained on GFN2-xTB
  labelled QM9 molecules. The demo relaxes ethanol, runs NVE molecular dynamics from there and prints the total
  energy (which a conservative potential keeps) and the net force (zero to rounding), with GFN2-xTB's forces
  beside the model's where tblite is installed.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from ase import units
from ase.build import molecule
from ase.calculators.emt import EMT
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import Stationary, ZeroRotation, thermalize_momenta
from ase.md.verlet import VelocityVerlet
from ase.optimize import BFGS

import zoo
from zoo.escaip.make_data import build_system
from zoo.hub import where
from zoo.registry import get_entry

DEFAULT_MODEL = "escaip-tiny-emt"
MOLECULE_MODEL = "escaip-qm9-xtb"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=600.0)
    parser.add_argument("--molecule-model", default=MOLECULE_MODEL)
    parser.add_argument("--molecule", default="CH3CH2OH", help="a name ase.build.molecule knows")
    args = parser.parse_args()

    local = [n for n in zoo.list_models() if where(get_entry(n)) == "embedded"]
    print(f"models in the embedded mirror (the rest load from the Hub or their official files): {', '.join(local)}")
    t0 = time.perf_counter()
    model = zoo.load(args.model)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"loaded {args.model}: {type(model).__name__}, {n_params:,} parameters, in {time.perf_counter() - t0:.2f} s")

    atoms = build_system("emt", "cu111_o")
    atoms.calc = model.as_calculator()
    relax = BFGS(atoms, logfile=None)  # from the built geometry to the model's minimum, as make-data starts its MD
    relax.run(fmax=0.1, steps=200)
    print(f"relaxed with the model: {relax.get_number_of_steps()} BFGS steps, "
          f"max force {np.linalg.norm(atoms.get_forces(), axis=1).max():.3f} eV/Å")
    rng = np.random.default_rng(0)
    thermalize_momenta(atoms, args.temperature, rng=rng)
    # the fixed bottom layer pins the slab, so no centre-of-mass fix
    dyn = Langevin(atoms, 1.0 * units.fs, temperature_K=args.temperature, friction=0.02, fixcm=False, rng=rng)
    emt = EMT()
    print(f"\nLangevin MD of O on Cu(111), {len(atoms)} atoms, {args.temperature:.0f} K, 1 fs steps, "
          "EScAIP driving, EMT as reference:")
    print(f"{'step':>5s} {'T (K)':>7s} {'E model (eV)':>13s} {'E EMT (eV)':>11s} {'F MAE (meV/Å)':>14s}")
    t0 = time.perf_counter()
    errors = []
    for done, step in report_points(args.steps):
        dyn.run(step - done)
        probe = atoms.copy()
        f_ref, e_ref = emt.get_forces(probe), emt.get_potential_energy(probe)
        f_mae = 1e3 * np.abs(atoms.get_forces(apply_constraint=False) - f_ref).mean()  # every atom, as EMT's
        errors.append(f_mae)
        print(f"{step:5d} {atoms.get_temperature():7.0f} {atoms.get_potential_energy():13.3f} {e_ref:11.3f} {f_mae:14.1f}")
    elapsed = time.perf_counter() - t0
    print(f"\n{args.steps} MD steps in {elapsed:.1f} s ({args.steps / elapsed:.1f} steps/s on CPU); "
          f"mean force error vs EMT {np.mean(errors):.1f} meV/Å; all positions finite: "
          f"{bool(np.isfinite(atoms.get_positions()).all())}")
    molecule_md(args.molecule_model, args.molecule, args.steps)


def report_points(steps: int, every: int = 20) -> list[tuple[int, int]]:
    """(steps done, steps at the next report) pairs: a report every ``every`` MD steps, at step 0 and the last."""
    marks = [*range(0, steps, every), steps]
    return list(zip([0, *marks], marks))


def molecule_md(name: str, formula: str, steps: int, temperature: float = 300.0) -> None:
    """Relax a molecule with the conservative model, then run NVE MD: total energy and net force along the way."""
    try:
        from tblite.ase import TBLite
    except ImportError:
        TBLite = None
    model = zoo.load(name)
    atoms = molecule(formula)
    atoms.calc = model.as_calculator()
    relax = BFGS(atoms, logfile=None)
    relax.run(fmax=0.05, steps=200)
    print(f"\n{name}: {formula} relaxed in {relax.get_number_of_steps()} BFGS steps to max force "
          f"{np.linalg.norm(atoms.get_forces(), axis=1).max():.3f} eV/Å")
    thermalize_momenta(atoms, 2 * temperature, rng=np.random.default_rng(0))  # equipartition halves it
    Stationary(atoms)
    ZeroRotation(atoms)
    dyn = VelocityVerlet(atoms, 0.5 * units.fs)
    reference = "GFN2-xTB" if TBLite else "no reference (pip install tblite)"
    print(f"NVE MD of {formula}, {len(atoms)} atoms, 0.5 fs steps, {name} driving, {reference}:")
    print(f"{'step':>5s} {'T (K)':>7s} {'E total (eV)':>13s} {'|net F| (eV/Å)':>15s} {'F MAE (meV/Å)':>14s}")
    e0 = atoms.get_total_energy()
    for done, step in report_points(steps):
        dyn.run(step - done)
        forces = atoms.get_forces()
        error = ""
        if TBLite:
            probe = atoms.copy()
            probe.calc = TBLite(method="GFN2-xTB", verbosity=0)
            error = f"{1e3 * np.abs(forces - probe.get_forces()).mean():14.1f}"
        print(f"{step:5d} {atoms.get_temperature():7.0f} {atoms.get_total_energy():13.4f} "
              f"{np.linalg.norm(forces.sum(axis=0)):15.1e} {error}")
    print(f"total energy changed by {1e3 * (atoms.get_total_energy() - e0) / len(atoms):+.2f} meV/atom over "
          f"{steps * 0.5 / 1000:.3f} ps")


if __name__ == "__main__":
    main()
