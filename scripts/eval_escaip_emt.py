"""Measure an EMT-trained EScAIP model on trajectories it never saw, and write a parity plot.

For every slab system of ``zoo escaip make-data``, a trajectory is made as make-data makes the training data
(EMT-driven Langevin MD from the relaxed slab) at a temperature and seed outside the training set; every
``--stride``-th frame is labelled by EMT and predicted by the model. Then the model drives its own Langevin MD
on Cu(111)+O to check it stays physical.

    python scripts/eval_escaip_emt.py escaip-tiny-emt --out eval/    # writes eval/metrics.json, eval/force_parity.png

Forces are compared on every atom, the fixed bottom layer included (``apply_constraint=False``): the model was
trained on those unconstrained forces, and the constraint would zero both sides there, which dilutes the force MAE
and makes the fixed atoms' cosines zero.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import ase.io
import numpy as np
from ase import units
from ase.calculators.emt import EMT
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import thermalize_momenta
from tqdm.auto import tqdm

import zoo
from zoo.escaip.make_data import SLABS, Job, build_system, run_job


def held_out_frames(name: str, temperature: float, seed: int, frames: int, stride: int):
    """(atoms, EMT energy, EMT forces) along a fresh trajectory made exactly as `zoo escaip make-data` makes the
    training data (BFGS relaxation, thermalised momenta, Langevin MD, unconstrained forces), at another
    temperature and seed."""
    job = Job("emt", name, float(temperature), seed, frames, stride, timestep_fs=1.0, segment_frames=frames)
    with tempfile.TemporaryDirectory() as tmp:
        run_job(job, tmp)
        labelled = ase.io.read(str(next((Path(tmp) / job.folder).glob("seg_*.extxyz"))), index=":")
    out = []
    for frame in labelled:
        energy, forces = frame.get_potential_energy(), frame.get_forces()
        frame.calc = None
        out.append((frame, energy, forces))
    return out


def model_md(model, steps: int, temperature: float, seed: int) -> dict:
    atoms = build_system("emt", "cu111_o")
    atoms.calc = model.as_calculator()
    rng = np.random.default_rng(seed)
    thermalize_momenta(atoms, temperature, rng=rng)
    # the fixed bottom layer pins the slab, so no centre-of-mass fix
    dyn = Langevin(atoms, 1.0 * units.fs, temperature_K=temperature, friction=0.02, fixcm=False, rng=rng)
    start = atoms.get_positions().copy()
    min_dist = np.inf
    for _ in tqdm(range(steps // 10), desc="model MD", leave=False):
        dyn.run(10)
        d = atoms.get_all_distances(mic=True)
        min_dist = min(min_dist, d[np.triu_indices(len(atoms), 1)].min())
    emt = EMT()
    emt_forces = emt.get_forces(atoms)  # a calculator's own forces: unconstrained
    model_forces = atoms.get_forces(apply_constraint=False)
    return {
        "md_steps": steps,
        "md_temperature_K": temperature,
        "md_min_interatomic_distance_A": float(min_dist),
        "md_max_displacement_A": float(np.linalg.norm(atoms.get_positions() - start, axis=1).max()),
        "md_final_force_mae_vs_emt_meV_per_A": float(np.abs(model_forces - emt_forces).mean() * 1e3),
        "md_finite": bool(np.isfinite(atoms.get_positions()).all()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="zoo model name or folder")
    parser.add_argument("--out", default="eval-escaip-emt")
    parser.add_argument("--temperature", type=float, default=650.0, help="not one of the training temperatures")
    parser.add_argument("--seed", type=int, default=7, help="not one of the training seeds")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--stride", type=int, default=10)
    parser.add_argument("--md-steps", type=int, default=1000)
    args = parser.parse_args()

    model = zoo.load(args.name)
    calc = model.as_calculator()
    rows, pred_all, ref_all = [], [], []
    for name in tqdm(sorted(SLABS), desc="held-out trajectories"):
        e_err, f_err, cos = [], [], []
        for atoms, energy, forces in held_out_frames(name, args.temperature, args.seed, args.frames, args.stride):
            atoms.calc = calc
            pe, pf = atoms.get_potential_energy(), atoms.get_forces(apply_constraint=False)
            e_err.append(abs(pe - energy) / len(atoms))
            f_err.append(np.abs(pf - forces).mean())
            norms = np.linalg.norm(pf, axis=1) * np.linalg.norm(forces, axis=1)
            cos.append(float(((pf * forces).sum(1) / np.maximum(norms, 1e-12)).mean()))
            pred_all.append(pf.ravel())
            ref_all.append(forces.ravel())
        rows.append({"system": name, "energy_mae_meV_per_atom": 1e3 * float(np.mean(e_err)),
                     "force_mae_meV_per_A": 1e3 * float(np.mean(f_err)), "force_cos": float(np.mean(cos))})

    metrics = {
        "energy_mae_meV_per_atom": float(np.mean([r["energy_mae_meV_per_atom"] for r in rows])),
        "force_mae_meV_per_A": float(np.mean([r["force_mae_meV_per_A"] for r in rows])),
        "force_cos": float(np.mean([r["force_cos"] for r in rows])),
        **model_md(model, args.md_steps, args.temperature, args.seed),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps({"per_system": rows, "overall": metrics}, indent=2))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ref, pred = np.concatenate(ref_all), np.concatenate(pred_all)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(ref, pred, s=2, alpha=0.4)
    lim = float(np.abs(ref).max()) * 1.05
    ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), xlabel="EMT force component (eV/Å)", ylabel="EScAIP (eV/Å)",
           title=f"held-out MD, {args.temperature:.0f} K: MAE {metrics['force_mae_meV_per_A']:.0f} meV/Å")
    fig.tight_layout()
    fig.savefig(out / "force_parity.png", dpi=120)

    print(f"{'system':10s} {'E MAE meV/atom':>15s} {'F MAE meV/Å':>12s} {'F cos':>6s}")
    for r in rows:
        print(f"{r['system']:10s} {r['energy_mae_meV_per_atom']:15.2f} {r['force_mae_meV_per_A']:12.1f} {r['force_cos']:6.3f}")
    print(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
