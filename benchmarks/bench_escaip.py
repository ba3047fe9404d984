"""EScAIP inference scaling on periodic Cu: cell-list graph (ours) vs the official all-pairs candidate search.

Config: hidden 128, 4 layers, 8 heads, k 30, pad 45, cutoff 6 Å (other sizes at the authors' defaults),
direct energy + forces, float32, CPU, one thread. Times are the CPU time of that one thread
(``time.process_time``), so a busy shared machine does not distort them; wall-clock is printed as well.
Every measurement runs in a fresh process, so its peak memory (VmHWM above the resident size before the
forward) is its own. The all-pairs baseline runs in the same invocation for the sizes whose candidate
arrays fit ``--baseline-gb``.

    python benchmarks/bench_escaip.py                 # 108 .. 5000 atoms (several minutes)
    python benchmarks/bench_escaip.py --quick         # up to 1000 atoms
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import time

CONFIG = dict(hidden_size=128, num_layers=4, atten_num_heads=8, knn_k=30, knn_pad_size=45, max_radius=6.0,
              freequency_list=[4, 4, 4, 2, 2], max_num_elements=110, direct_forces=True, regress_forces=True)
HEADS = {"energy": {"module": "EScAIP_energy_head"}, "forces": {"module": "EScAIP_direct_force_head"}}
# fcc Cu conventional cells (4 atoms) repeated: 108 .. 5000 atoms
REPEATS = [(3, 3, 3), (4, 4, 4), (5, 5, 5), (5, 5, 10), (5, 10, 10), (10, 10, 10), (5, 10, 25)]
BYTES_PER_CANDIDATE = 200  # all-pairs search: indices, images, image positions and distances per (i, j, image)


def _memory_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident size
        return True
    except OSError:
        return False


def measure(reps: tuple[int, int, int], search: str, repeats: int, seed: int = 0) -> dict:
    """One size, one graph search, in this (fresh) process."""
    import numpy as np
    import torch
    from ase.build import bulk

    from zoo.escaip.graph import build_graph
    from zoo.escaip.model import EScAIP

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model = EScAIP({**CONFIG, "neighbor_search": search}, HEADS).eval()
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(reps)
    atoms.rattle(0.05, seed=seed)
    args = (torch.tensor(atoms.positions, dtype=torch.float32), torch.tensor(atoms.numbers),
            torch.tensor(atoms.cell.array, dtype=torch.float32)[None], torch.ones(1, 3, dtype=torch.bool),
            torch.tensor([len(atoms)]))
    with torch.no_grad():
        before = _memory_kb("VmRSS")
        exact_peak = _reset_peak()
        model(*args)  # warm-up, and the peak-memory measurement
        peak_kb = (_memory_kb("VmHWM") if exact_peak else _memory_kb("VmPeak")) - before
        graph_s, forward_s, wall_s = math.inf, math.inf, math.inf
        for _ in range(repeats):
            t = time.process_time()
            build_graph(args[0], args[2], args[3], args[4], model.cfg.graph)
            graph_s = min(graph_s, time.process_time() - t)
            t, w = time.process_time(), time.perf_counter()
            out = model(*args)
            forward_s = min(forward_s, time.process_time() - t)
            wall_s = min(wall_s, time.perf_counter() - w)
    assert np.isfinite(out["energy"].item())
    return {"atoms": len(atoms), "graph_s": graph_s, "forward_s": forward_s, "wall_s": wall_s,
            "peak_mb": peak_kb / 1024}


def _in_fresh_process(*args) -> dict:
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(measure, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes up to 1000 atoms")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per size (the minimum is reported)")
    parser.add_argument("--baseline-gb", type=float, default=6.0,
                        help="run the all-pairs baseline where its candidate arrays stay below this")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the measurement processes

    repeats = [r for r in REPEATS if not args.quick or 4 * math.prod(r) <= 1000]
    rows = []
    for reps in repeats:
        n = 4 * math.prod(reps)
        ours = _in_fresh_process(reps, "cell_list", args.repeats)
        # the official image range for this cell is 1 in every direction (27 images) from 108 atoms on
        baseline = None
        if n * n * 27 * BYTES_PER_CANDIDATE / 1e9 <= args.baseline_gb:
            baseline = _in_fresh_process(reps, "all_pairs", args.repeats)
        rows.append((ours, baseline))
        print(f"measured {n} atoms", flush=True)

    first = rows[0][0]
    head = (f"{'atoms':>6} | {'graph ms':>9} {'fwd s':>8} {'wall s':>7} {'atoms/s':>8} {'peak MB':>8} {'us/atom':>8} "
            f"{'x 108':>6} | {'graph ms':>9} {'fwd s':>8} {'peak MB':>8} | {'graph x':>8} {'fwd x':>6} {'mem x':>6}")
    print("\nEScAIP H128 L4 8 heads, k 30, pad 45, cutoff 6 Å; periodic fcc Cu; float32, CPU, 1 thread;")
    print("times are single-thread CPU seconds (minimum of the timed runs), 'wall s' the elapsed forward time")
    print(f"{'':6} | {'cell list (ours)':^65} | {'all pairs (official search)':^28} | {'all pairs / ours':^23}")
    print(head)
    print("-" * len(head))
    for ours, base in rows:
        per_atom = ours["forward_s"] / ours["atoms"]
        growth = per_atom / (first["forward_s"] / first["atoms"])
        line = (f"{ours['atoms']:>6} | {1e3 * ours['graph_s']:>9.1f} {ours['forward_s']:>8.2f} {ours['wall_s']:>7.2f} "
                f"{ours['atoms'] / ours['forward_s']:>8.0f} {ours['peak_mb']:>8.0f} {1e6 * per_atom:>8.0f} {growth:>6.2f} |")
        if base is None:
            line += f" {'(does not fit)':>28} |"
        else:
            line += (f" {1e3 * base['graph_s']:>9.1f} {base['forward_s']:>8.2f} {base['peak_mb']:>8.0f} |"
                     f" {base['graph_s'] / ours['graph_s']:>8.1f} {base['forward_s'] / ours['forward_s']:>6.2f}"
                     f" {base['peak_mb'] / max(ours['peak_mb'], 1):>6.2f}")
        print(line)
    # cost exponent: slope of log(time) and log(memory) against log(atoms) over the cell-list series
    import numpy as np

    n = np.log([r[0]["atoms"] for r in rows])
    for key, label in (("forward_s", "forward time"), ("graph_s", "graph time"), ("peak_mb", "peak memory")):
        slope = np.polyfit(n, np.log([max(r[0][key], 1e-9) for r in rows]), 1)[0]
        print(f"{label:13s} grows as atoms^{slope:.2f} (1.00 = linear)")
    with_base = [r for r in rows if r[1] is not None]
    if len(with_base) >= 2:
        slope = np.polyfit(np.log([r[1]["atoms"] for r in with_base]),
                           np.log([r[1]["graph_s"] for r in with_base]), 1)[0]
        print(f"all-pairs graph time grows as atoms^{slope:.2f}")


if __name__ == "__main__":
    main()
