"""Measure an EScAIP model trained on ``zoo escaip make-data`` output, as reported in escaip-small-xtb's card.

* held-out trajectories: every ``--test-pattern`` trajectory (recipes/escaip/small_xtb.yaml excludes T500_s1
  from training) of the training systems, and every trajectory of the ``--unseen`` molecules;
  per system: energy MAE (meV/atom), force MAE (meV/Å) and the mean force cosine;
* the symmetry report (rotation invariance of energy, equivariance of the direct forces);
* a 10 ps Nose-Hoover-chain NVT run of ethanol with the model's ASE calculator (drift of the conserved energy,
  the closest pair, the farthest atom from the centre, xTB force error on frames along the way);
* a parity plot (predicted vs reference force components) as a PNG.

    python scripts/eval_escaip_xtb.py runs/escaip-small-xtb/repo data/escaip --out eval/ [--md-ps 10]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from ase import units
from ase.md.nose_hoover_chain import NoseHooverChainNVT
from ase.md.velocitydistribution import Stationary, ZeroRotation, thermalize_momenta
from tqdm.auto import tqdm

import zoo
from zoo.escaip.data import AtomCountBatchSampler, collate_atoms, read_structures
from zoo.escaip.make_data import build_system
from zoo.escaip.symmetry import format_report, symmetry_report


def predict_frames(model, samples, max_atoms: int = 512):
    """Predicted energies (G,) and forces (N, 3) for labelled samples, in order, batched by atom count."""
    batches = AtomCountBatchSampler(None, [len(s["atomic_numbers"]) for s in samples], max_atoms, shuffle=False)
    outs = [model.predict(collate_atoms([samples[i] for i in batch])) for batch in batches]
    return (np.concatenate([o["energy"].numpy() for o in outs]),
            np.concatenate([o["forces"].double().numpy() for o in outs]))


def system_metrics(model, samples) -> tuple[dict, np.ndarray, np.ndarray]:
    pred_e, pred_f = predict_frames(model, samples)
    ref_e = np.array([s["energy"] for s in samples])
    ref_f = np.concatenate([s["forces"] for s in samples])
    natoms = np.array([len(s["atomic_numbers"]) for s in samples])
    norms = np.linalg.norm(pred_f, axis=1) * np.linalg.norm(ref_f, axis=1)
    cos = (pred_f * ref_f).sum(1) / np.maximum(norms, 1e-12)
    # a molecule's size, or the range of sizes of a mixed set (a validation split)
    atoms = int(natoms[0]) if (natoms == natoms[0]).all() else f"{natoms.min()}-{natoms.max()}"
    row = {"frames": len(samples), "atoms": atoms,
           "energy_mae_meV_per_atom": 1e3 * float(np.mean(np.abs(pred_e - ref_e) / natoms)),
           "force_mae_meV_per_A": 1e3 * float(np.mean(np.abs(pred_f - ref_f))),
           "force_cos": float(np.mean(cos))}
    return row, pred_f.ravel(), ref_f.ravel()


def ethanol_nvt(model, picoseconds: float, temperature: float, seed: int, check_every_ps: float = 1.0) -> dict:
    """Model-driven NVT MD of ethanol; the xTB force error is sampled every ``check_every_ps``."""
    from tblite.ase import TBLite

    atoms = build_system("xtb", "ethanol")
    atoms.calc = model.as_calculator()
    rng = np.random.default_rng(seed)
    thermalize_momenta(atoms, temperature, rng=rng)
    Stationary(atoms)
    ZeroRotation(atoms)
    timestep_fs = 0.5
    dyn = NoseHooverChainNVT(atoms, timestep_fs * units.fs, temperature_K=temperature, tdamp=100 * timestep_fs * units.fs)
    steps = int(round(picoseconds * 1000 / timestep_fs))
    chunk = int(round(check_every_ps * 1000 / timestep_fs))
    xtb = TBLite(method="GFN2-xTB", verbosity=0)
    conserved0 = dyn.get_conserved_energy()
    conserved, temps, min_dist, max_radius, xtb_err = [], [], np.inf, 0.0, []
    for _ in tqdm(range(steps // 10), desc="ethanol NVT", leave=False):
        dyn.run(10)
        d = atoms.get_all_distances()
        min_dist = min(min_dist, float(d[np.triu_indices(len(atoms), 1)].min()))
        max_radius = max(max_radius, float(np.linalg.norm(atoms.positions - atoms.get_center_of_mass(), axis=1).max()))
        conserved.append(dyn.get_conserved_energy() - conserved0)
        temps.append(atoms.get_temperature())
        if dyn.nsteps % chunk == 0:
            probe = atoms.copy()
            probe.calc = xtb
            xtb_err.append(float(np.abs(atoms.get_forces() - probe.get_forces()).mean()))
    bonds_kept = bool(d.max() < 6.0)  # ethanol's largest intramolecular distance is ~3.8 Å
    conserved = np.array(conserved)
    return {
        "md_ps": picoseconds, "md_timestep_fs": timestep_fs, "md_temperature_K": temperature,
        "md_mean_temperature_K": float(np.mean(temps[len(temps) // 5:])),
        "md_conserved_energy_drift_meV_per_atom_per_ps": 1e3 * float(conserved[-1]) / len(atoms) / picoseconds,
        "md_conserved_energy_max_dev_meV_per_atom": 1e3 * float(np.abs(conserved).max()) / len(atoms),
        "md_min_interatomic_distance_A": min_dist,
        "md_max_distance_from_com_A": max_radius,
        "md_molecule_intact": bonds_kept and min_dist > 0.6,
        "md_finite": bool(np.isfinite(atoms.positions).all()),
        "md_force_mae_vs_xtb_meV_per_A": 1e3 * float(np.mean(xtb_err)),
    }


def parity_plot(panels: dict[str, tuple[np.ndarray, np.ndarray]], path: Path) -> None:
    """One hexbin panel per group: title -> (reference, predicted) force components."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.8), squeeze=False)
    for ax, (title, (ref, pred)) in zip(axes[0], panels.items()):
        ax.hexbin(ref, pred, gridsize=120, bins="log", mincnt=1, cmap="viridis")
        lim = float(np.quantile(np.abs(ref), 0.999)) * 1.1
        ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
        ax.set(xlim=(-lim, lim), ylim=(-lim, lim), xlabel="reference force component (eV/Å)",
               ylabel="EScAIP (eV/Å)", title=f"{title}\nforce MAE {1e3 * np.abs(ref - pred).mean():.0f} meV/Å")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def table(rows: list[dict]) -> str:
    lines = ["| system | frames | atoms | energy MAE (meV/atom) | force MAE (meV/Å) | force cosine |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['system']} | {r['frames']} | {r['atoms']} | {r['energy_mae_meV_per_atom']:.1f} | "
                     f"{r['force_mae_meV_per_A']:.1f} | {r['force_cos']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="zoo model name or folder")
    parser.add_argument("data", help="the folder of `zoo escaip make-data`")
    parser.add_argument("--out", default="eval-escaip-xtb")
    parser.add_argument("--test-pattern", default="T500_s1", help="trajectory folder held out of training")
    parser.add_argument("--unseen", nargs="*", default=["toluene", "uracil"], help="molecules never trained on")
    parser.add_argument("--md-ps", type=float, default=10.0)
    parser.add_argument("--md-temperature", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_grad_enabled(False)

    model = zoo.load(args.model)
    data = Path(args.data)
    groups: dict[str, list[tuple[str, list[Path]]]] = {"held_out": [], "unseen": []}
    for kind in ("xtb", "emt"):
        for system in sorted(p for p in (data / kind).iterdir() if p.is_dir()):
            if system.name in args.unseen:
                groups["unseen"].append((system.name, [system]))
            elif (system / args.test_pattern).is_dir():
                groups["held_out"].append((system.name, [system / args.test_pattern]))
    results, parity = {}, {}
    for group, systems in groups.items():
        rows, preds, refs = [], [], []
        for name, paths in tqdm(systems, desc=group):
            row, pred, ref = system_metrics(model, read_structures(paths))
            rows.append({"system": name, **row})
            preds.append(pred)
            refs.append(ref)
        results[group] = rows
        parity[group] = (np.concatenate(refs), np.concatenate(preds))
    molecules = [r for r in results["held_out"] if (data / "xtb" / r["system"]).is_dir()]
    overall = {
        "held_out_molecules_force_mae_meV_per_A": float(np.mean([r["force_mae_meV_per_A"] for r in molecules])),
        "held_out_molecules_energy_mae_meV_per_atom": float(np.mean([r["energy_mae_meV_per_atom"] for r in molecules])),
        "held_out_molecules_force_cos": float(np.mean([r["force_cos"] for r in molecules])),
        "held_out_slabs_force_mae_meV_per_A": float(np.mean(
            [r["force_mae_meV_per_A"] for r in results["held_out"] if r not in molecules])),
        "unseen_force_mae_meV_per_A": float(np.mean([r["force_mae_meV_per_A"] for r in results["unseen"]])),
        "unseen_energy_mae_meV_per_atom": float(np.mean([r["energy_mae_meV_per_atom"] for r in results["unseen"]])),
    }
    symmetry = symmetry_report(model, n_rotations=16, n_translations=8, seed=args.seed)
    md = ethanol_nvt(model, args.md_ps, args.md_temperature, args.seed)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"overall": overall, **results, "symmetry": symmetry, "ethanol_nvt": md}
    (out / "metrics.json").write_text(json.dumps(report, indent=2))
    parity_plot({"held-out trajectories (xTB molecules + EMT slabs)": parity["held_out"],
                 f"unseen molecules ({', '.join(args.unseen)})": parity["unseen"]}, out / "force_parity.png")

    print("held-out trajectories\n" + table(results["held_out"]))
    print("\nunseen molecules\n" + table(results["unseen"]))
    print("\nsymmetry\n" + format_report(symmetry))
    print(json.dumps({"overall": overall, "ethanol_nvt": md}, indent=2))


if __name__ == "__main__":
    main()
