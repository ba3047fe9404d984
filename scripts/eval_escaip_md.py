"""A conservative EScAIP model in molecular dynamics of drug-sized molecules it never saw (issue 45), beside
GFN2-xTB (tblite), the method it imitates. The molecules have more than 9 heavy atoms, so none is in QM9, and none
is in any zoo training set:

* NVE (velocity Verlet, 0.5 fs, 10 ps) from the same start for the model and for xTB: the standard deviation, the
  peak-to-peak range and the drift (a linear fit) of the total energy; a plot of both traces;
* fine-tuning as a user does it: 40 frames of one 300 K xTB Langevin trajectory written to an extxyz, then
  ``zoo finetune MODEL escaip/finetune_molecule --data.init_args.train=frames.extxyz``, ``zoo publish`` and
  ``zoo.load``; the force error on an independent 300 K trajectory (another seed) before, after, and for the same
  recipe trained from scratch on the same frames (``zoo train``).

The start is an RDKit conformer relaxed with xTB; its velocities are a seeded 300 K draw on the internal degrees of
freedom at twice the temperature (equipartition with the potential energy brings them to about 300 K).

    python scripts/eval_escaip_md.py escaip-qm9-xtb --out runs/escaip-md-eval     # about 1 h on 2 cores

Every step's result is kept in OUT and reused, so a killed run resumes; ``--ps`` shortens the NVE runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch and tblite load their thread pools

import numpy as np
from ase import units
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import read, write
from ase.md.langevin import Langevin
from ase.md.verlet import VelocityVerlet
from ase.optimize import BFGS
from eval_escaip_g2 import thermalize_internal
from eval_escaip_xtb import system_metrics
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_escaip_md import embed, xtb_calculator  # noqa: E402

import zoo  # noqa: E402
from zoo.escaip.data import read_structures  # noqa: E402
from zoo.io import write_json_atomic  # noqa: E402

# name -> SMILES (atoms with hydrogens, heavy atoms)
MOLECULES = {
    "aspirin": "CC(=O)Oc1ccccc1C(=O)O",  # 21, 13
    "caffeine": "Cn1cnc2c1c(=O)n(C)c(=O)n2C",  # 24, 14
    "ibuprofen": "CC(C)Cc1ccc(cc1)C(C)C(=O)O",  # 33, 15
}
TEMPERATURE = 300.0
TIMESTEP_FS = 0.5
RECORD_EVERY = 10  # NVE steps between total-energy samples
FINETUNE_RECIPE = "escaip/finetune_molecule"  # a shipped recipe, found by name


def start(folder: Path, smiles: str):
    """The xTB-relaxed conformer with its seeded 300 K velocities (cached as start.extxyz)."""
    path = folder / "start.extxyz"
    if path.exists():
        return read(path)
    atoms = embed(smiles)
    atoms.calc = xtb_calculator()
    BFGS(atoms, logfile=None).run(fmax=0.01, steps=500)
    thermalize_internal(atoms, TEMPERATURE, seed=0)
    atoms.calc = None
    folder.mkdir(parents=True, exist_ok=True)
    write(path, atoms)
    return atoms


def nve(folder: Path, label: str, atoms, calc, picoseconds: float) -> dict:
    """Total energies (meV) every RECORD_EVERY steps of a velocity-Verlet run (cached by label and length)."""
    path = folder / f"nve_{label}_{picoseconds:g}ps.npy"
    if not path.exists():
        atoms = atoms.copy()
        atoms.calc = calc
        dyn = VelocityVerlet(atoms, timestep=TIMESTEP_FS * units.fs)
        energies = [atoms.get_total_energy()]
        for _ in tqdm(range(round(picoseconds * 1000 / TIMESTEP_FS) // RECORD_EVERY), desc=f"{folder.name} {label} NVE",
                      leave=False):
            dyn.run(RECORD_EVERY)
            energies.append(atoms.get_total_energy())
        part = path.with_suffix(".part.npy")  # a killed run leaves no half-written cache
        np.save(part, 1e3 * np.array(energies))
        part.replace(path)
    energies = np.load(path)
    times_ps = np.arange(len(energies)) * RECORD_EVERY * TIMESTEP_FS / 1000
    line = np.polyfit(times_ps, energies, 1)
    return {"std_meV": float(energies.std()), "peak_to_peak_meV": float(np.ptp(energies)),
            "drift_meV_per_atom_per_ps": float(line[0]) / len(atoms),
            "std_detrended_meV": float((energies - np.polyval(line, times_ps)).std()),  # the drift taken out
            "trace": energies - energies[0], "times_ps": times_ps}


def langevin_frames(path: Path, atoms, seed: int, frames: int, every_fs: float = 25.0, warmup_ps: float = 0.5):
    """``frames`` xTB-labelled frames, every ``every_fs``, of a 300 K Langevin run after ``warmup_ps``."""
    if not path.exists():
        atoms = atoms.copy()
        atoms.calc = xtb_calculator()
        dyn = Langevin(atoms, TIMESTEP_FS * units.fs, temperature_K=TEMPERATURE, friction=0.01 / units.fs,
                       rng=np.random.default_rng(seed))
        dyn.run(round(warmup_ps * 1000 / TIMESTEP_FS))
        labelled = []
        for _ in tqdm(range(frames), desc=f"{path.parent.name} xTB 300 K seed {seed}", leave=False):
            dyn.run(round(every_fs / TIMESTEP_FS))
            frame = atoms.copy()
            frame.calc = SinglePointCalculator(frame, energy=atoms.get_potential_energy(), forces=atoms.get_forces())
            labelled.append(frame)
        write(path.with_suffix(".part.extxyz"), labelled)
        path.with_suffix(".part.extxyz").replace(path)
    return path


def zoo_cli(*args: str) -> None:
    subprocess.run([sys.executable, "-c", "import sys; from zoo.cli import main; sys.exit(main())", *args], check=True)


def trained(folder: Path, base: str | None, frames: Path) -> Path:
    """``zoo finetune BASE`` (or, without a base, ``zoo train``) of the shipped recipe on ``frames``, published."""
    repo = folder / "repo"
    if not (repo / "config.json").exists():
        overrides = [f"--data.init_args.train={frames}", f"--trainer.default_root_dir={folder}", "--ckpt-path", "last"]
        zoo_cli(*(["finetune", base] if base else ["train"]), FINETUNE_RECIPE, *overrides)
        zoo_cli("publish", str(folder / "checkpoints" / "last.ckpt"), str(repo))
    return repo


def force_mae(model, frames: Path) -> float:
    return system_metrics(model, read_structures([frames]))[0]["force_mae_meV_per_A"]


def plot(traces: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(traces), figsize=(5 * len(traces), 3.5), squeeze=False)
    for ax, (name, runs) in zip(axes[0], traces.items()):
        for label, run in runs.items():
            ax.plot(run["times_ps"], run["trace"], lw=0.6, label=f"{label} (std {run['std_meV']:.2f} meV)")
        ax.set(title=f"{name}: NVE {TIMESTEP_FS} fs", xlabel="time (ps)", ylabel="E_total - E_total(0) (meV)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="zoo model name or published folder (a conservative EScAIP)")
    parser.add_argument("--out", type=Path, default=Path("runs/escaip-md-eval"))
    parser.add_argument("--molecules", nargs="+", default=list(MOLECULES), choices=list(MOLECULES))
    parser.add_argument("--ps", type=float, default=10.0, help="NVE length in picoseconds")
    parser.add_argument("--skip-finetune", action="store_true")
    args = parser.parse_args()

    model = zoo.load(args.model)
    tag = args.model.strip("/").replace("/", "_")  # what the model's cached results are kept under
    report, traces = {}, {}
    for name in args.molecules:
        folder = args.out / name
        atoms = start(folder, MOLECULES[name])
        runs = {"GFN2-xTB": nve(folder, "xtb", atoms, xtb_calculator(), args.ps),
                "zoo": nve(folder, f"zoo_{tag}", atoms, model.as_calculator(), args.ps)}
        traces[name] = runs
        row = {"atoms": len(atoms), **{f"nve_{label}_{key}": value for label, run in runs.items()
                                       for key, value in run.items() if key not in ("trace", "times_ps")}}
        row["nve_std_ratio"] = runs["zoo"]["std_meV"] / runs["GFN2-xTB"]["std_meV"]
        if not args.skip_finetune:
            train = langevin_frames(folder / "train_seed1.extxyz", atoms, seed=1, frames=40)
            test = langevin_frames(folder / "test_seed2.extxyz", atoms, seed=2, frames=80)
            finetuned = trained(folder / f"finetune_{tag}", args.model, train)
            scratch = trained(folder / "scratch", None, train)
            row |= {"force_mae_before": force_mae(model, test), "force_mae_after": force_mae(zoo.load(finetuned), test),
                    "force_mae_scratch": force_mae(zoo.load(scratch), test),
                    "force_mae_before_on_train": force_mae(model, train)}
            row["finetune_error_ratio"] = row["force_mae_after"] / row["force_mae_before"]
        report[name] = row
        print(json.dumps({name: row}), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "metrics.json", {"model": args.model, "nve_ps": args.ps, "molecules": report})
    plot(traces, args.out / "nve.png")
    keys = sorted({k for row in report.values() for k in row})
    print("| molecule | " + " | ".join(keys) + " |")
    for name, row in report.items():
        print(f"| {name} | " + " | ".join(f"{row.get(k, float('nan')):.3g}" for k in keys) + " |")


if __name__ == "__main__":
    main()
