"""EScAIP training step of the escaip-qm9-xtb recipe: neighbour slots per chunk of atoms vs one width vs every slot.

The recipe's model (hidden 64, 3 layers, 4 heads, k 16, pad 24, cutoff 5 Å, gradient forces) takes AdamW steps on
batches of at most 256 atoms of rattled molecules of H, C, N, O, F (ASE's g2 geometries: only their shapes
matter for timing). The variants run in this process on the same batches, in turn, after a warm-up: every atom
padded to ``knn_pad_size`` slots (the baseline), every atom cut to the most slots any atom of the batch uses, and
the model's own ``width_plan`` (atoms sorted by the neighbours they keep, each chunk cut to its widest). Times are
wall-clock seconds per step (median of the timed steps), float32, CPU.

    python benchmarks/bench_escaip_train.py               # 2 threads, 30 timed steps per variant
    python benchmarks/bench_escaip_train.py --threads 1 --steps 10
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import torch

RECIPE = "qm9_xtb.yaml"


def molecule_batches(n_batches: int, max_atoms: int = 256, seed: int = 0) -> list[dict]:
    import numpy as np
    from ase.collections import g2

    from zoo.escaip.data import atoms_to_batch

    rng = np.random.default_rng(seed)
    names = [n for n in g2.names if set(g2[n].get_chemical_symbols()) <= {"H", "C", "N", "O", "F"} and len(g2[n]) > 1]
    batches = []
    for _ in range(n_batches):
        mols, total = [], 0
        while True:
            atoms = g2[names[rng.integers(len(names))]].copy()
            if total + len(atoms) > max_atoms:
                break
            atoms.rattle(0.05, seed=int(rng.integers(1 << 30)))
            mols.append(atoms)
            total += len(atoms)
        batch = atoms_to_batch(mols)
        n = int(batch["natoms"].sum())
        # zero labels: only the cost of a step is measured
        f64 = dict(dtype=torch.float64)
        batch.update(energy=torch.zeros(len(mols), **f64), forces=torch.zeros(n, 3, **f64),
                     stress=torch.zeros(len(mols), 3, 3, **f64), has_stress=torch.zeros(len(mols), dtype=torch.bool))
        batches.append(batch)
    return batches


@contextmanager
def widths(variant: str, pad: int):
    """The model's chunk plan replaced by one width for every atom (``padded``: knn_pad_size; ``one width``: the
    most any atom keeps), or kept (``per chunk``)."""
    import zoo.escaip.model as escaip_model

    plan = escaip_model.width_plan
    if variant != "per chunk":
        def one_width(kept: list[int], hidden: int) -> list[tuple[int, int]]:
            width = pad if variant == "padded" else max(kept[0], 1)
            return [(rows, width) for rows in escaip_model.row_chunks(len(kept), width, hidden)]

        escaip_model.width_plan = one_width
    try:
        yield
    finally:
        escaip_model.width_plan = plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per variant")
    args = parser.parse_args()

    import yaml

    from zoo.escaip.module import EScAIPModule

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes" / "escaip" / RECIPE).read_text())
    module = EScAIPModule(**recipe["model"]["init_args"])
    module.setup("validate")  # the metrics only (no trainer here to fit references from)
    module.log_dict = lambda *a, **k: None  # no trainer here
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4)
    batches = molecule_batches(args.steps + 3)

    def step(batch) -> float:
        t = time.perf_counter()
        optimizer.zero_grad()
        module._step(batch, "train").backward()
        optimizer.step()
        return time.perf_counter() - t

    variants = ("padded", "one width", "per chunk")
    times = {variant: [] for variant in variants}
    for i, batch in enumerate(batches):
        for variant in variants[i % 3:] + variants[:i % 3]:  # in turn: drifts hit all alike
            with widths(variant, module.cfg.knn_pad_size):
                dt = step(batch)
            if i >= 3:  # warm-up
                times[variant].append(dt)
    atoms = statistics.mean(int(b["natoms"].sum()) for b in batches)
    print(f"\nescaip-qm9-xtb recipe model, AdamW training step (energy + forces = -dE/dx, double backward), "
          f"{atoms:.0f} atoms per batch, float32, {args.threads} thread(s), median of {args.steps} steps")
    print(f"{'neighbour slots':<28} {'s / step':>9} {'steps / min':>12} {'speed-up':>9}")
    base = statistics.median(times["padded"])
    labels = {"padded": f"all {module.cfg.knn_pad_size} (knn_pad_size)", "one width": "most any atom uses",
              "per chunk": "per chunk (width_plan)"}
    for variant, label in labels.items():
        t = statistics.median(times[variant])
        print(f"{label:<28} {t:>9.3f} {60 / t:>12.0f} {base / t:>8.2f}x")

if __name__ == "__main__":
    main()
