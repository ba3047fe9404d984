"""EScAIP for molecular dynamics: ms per energy+forces call and MD steps/s, against what a user would pick instead.

Engines, all through their ASE calculators, in one process on one thread (OMP_NUM_THREADS=1, torch 1 thread):
  zoo    escaip-qm9-xtb (the molecule default; gradient forces), float32;
  zooc   the same through torch.compile (``as_calculator(compile=True)``; with --compile): at each size its first
         call runs eagerly and sizes the graph, the second compiles; the table's last column gives those seconds;
  xtb    GFN2-xTB through tblite's ASE calculator (the labels escaip-qm9-xtb learned);
  mace   a mace-torch ScaleShiftMACE of about the zoo model's parameter count (NxOe, L=3, correlation 3, 2
         layers), random weights;
  ani1   ANI-2x's architecture (torchani), one network, random weights (torchani downloads trained weights at
         run time, which this machine cannot); ani8 the 8-network ensemble.
Peers that do not import are skipped with a note: mace-torch and torchani are benchmark-only dependencies
(benchmarks/README.md says how to put them in a separate venv). Molecules come from SMILES (RDKit conformers);
the 501-atom system is a water cluster.

Timing on a shared machine is noisy, so every size measures its engines interleaved (call by call, MD run by
MD run), several times, and reports medians; ratios are of medians taken in the same process.

    python benchmarks/bench_escaip_md.py                 # 9 .. 501 atoms, then the batched API
    python benchmarks/bench_escaip_md.py --quick         # 9, 21 and 60 atoms, fewer repeats
    python benchmarks/bench_escaip_md.py --compile       # also the compiled zoo engine
    python benchmarks/bench_escaip_md.py --sizes 21 --repeats 30
    python benchmarks/bench_escaip_md.py --scaling       # forward time of the small config, 1,000-4,000 atoms
    python benchmarks/bench_escaip_md.py --floor         # matrix-product FLOPs per call and per batched molecule:
                                                         # the compute floor
    python benchmarks/bench_escaip_md.py --torchsim 32 2000   # batched NVE with TorchSim: drift, throughput
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch and tblite load their thread pools

# name -> SMILES; sizes with hydrogens in the comments
MOLECULES = {
    9: "CCO",  # ethanol
    15: "Cc1ccccc1",  # toluene
    21: "CC(=O)Oc1ccccc1C(=O)O",  # aspirin
    33: "CC(C)Cc1ccc(cc1)C(C)C(=O)O",  # ibuprofen
    60: "CCCCCCCCC=CCCCCCCCC(=O)OCC",  # ethyl oleate
    119: "C" * 39,  # nonatriacontane
}
WATER_CLUSTER = 501
# 64 molecules of 15-35 atoms for the batched API (8 conformers of each)
BATCH_SMILES = ["Cc1ccccc1", "CC(=O)Oc1ccccc1C(=O)O", "CC(C)Cc1ccc(cc1)C(C)C(=O)O", "CC(=O)Nc1ccc(O)cc1",
                "Cn1cnc2c1c(=O)n(C)c(=O)n2C", "OC(=O)c1ccccc1O", "CCN(CC)CC(=O)N", "CC(C)(C)c1ccc(O)cc1"]


def embed(smiles: str, seed: int = 0):
    from ase import Atoms
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    if AllChem.EmbedMolecule(mol, randomSeed=seed) != 0:
        raise RuntimeError(f"RDKit could not embed {smiles}")
    AllChem.MMFFOptimizeMolecule(mol)
    return Atoms([a.GetSymbol() for a in mol.GetAtoms()], mol.GetConformer().GetPositions())


def water_cluster(n_atoms: int, seed: int = 0):
    """Waters on a 3.1 Å grid, randomly oriented, the grid points nearest the centre."""
    import numpy as np
    from ase import Atoms
    from ase.build import molecule

    rng = np.random.default_rng(seed)
    side = int(np.ceil((n_atoms // 3) ** (1 / 3))) + 2
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3) * 3.1
    grid = grid[np.argsort(((grid - grid.mean(0)) ** 2).sum(1))][: n_atoms // 3]
    cluster = Atoms()
    for centre in grid:
        water = molecule("H2O")
        water.rotate(rng.uniform(0, 360), rng.normal(size=3))
        water.translate(centre)
        cluster += water
    return cluster


def systems(sizes):
    out = {}
    for n in sizes:
        atoms = water_cluster(n) if n == WATER_CLUSTER else embed(MOLECULES[n])
        assert len(atoms) == n, (n, len(atoms))
        out[n] = atoms
    return out


# ----------------------------------------------------------------------------- engines
def zoo_calculator(name: str, compile: bool = False):
    import zoo

    return zoo.load(name).as_calculator(compile=compile)


def xtb_calculator():
    from tblite.ase import TBLite

    return TBLite(method="GFN2-xTB", verbosity=0)


def mace_calculator(n_parameters: int):
    import numpy as np
    import torch
    from mace import modules  # before e3nn: mace lets e3nn load its constants file under torch >= 2.6
    from mace.calculators import MACECalculator
    from e3nn import o3

    elements = [1, 6, 7, 8, 9, 16, 17]

    def build(channels: int):
        torch.manual_seed(0)
        return modules.ScaleShiftMACE(
            r_max=5.0, num_bessel=8, num_polynomial_cutoff=5, max_ell=3,
            interaction_cls=modules.interaction_classes["RealAgnosticResidualInteractionBlock"],
            interaction_cls_first=modules.interaction_classes["RealAgnosticResidualInteractionBlock"],
            num_interactions=2, num_elements=len(elements), hidden_irreps=o3.Irreps(f"{channels}x0e"),
            MLP_irreps=o3.Irreps("16x0e"), gate=torch.nn.functional.silu, atomic_energies=np.zeros(len(elements)),
            avg_num_neighbors=10.0, atomic_numbers=elements, correlation=3, radial_MLP=[64, 64, 64],
            atomic_inter_scale=1.0, atomic_inter_shift=0.0)

    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    channels = min((32, 48, 64, 96, 128, 160), key=lambda c: abs(count(build(c)) - n_parameters))
    model = build(channels).float()
    label = f"{channels}x0e L3, 2 layers, {count(model) / 1e3:.0f}k params"
    return MACECalculator(models=model, device="cpu", default_dtype="float32"), label


def ani_calculator(n_networks: int):
    from torchani.arch import Assembler
    from torchani.models import SYMBOLS_2X

    # torchani.models.ANI2x without its state dict: the same assembly, random weights
    asm = Assembler(periodic_table_index=True)
    asm.set_symbols(SYMBOLS_2X)
    asm.set_global_cutoff_fn("cosine")
    asm.set_aev_computer(radial="ani2x", angular="ani2x", strategy="pyaev")
    asm.set_atomic_networks(ctor="ani2x")
    asm.set_neighborlist("all_pairs")
    asm.set_gsaes_as_self_energies("wb97x-631gd")
    model = asm.assemble(n_networks)
    model.requires_grad_(False)
    return model.ase()


def engines(zoo_name: str, compile: bool) -> dict:
    import torch

    torch.set_num_threads(1)
    zoo_calc = zoo_calculator(zoo_name)
    n_params = sum(p.numel() for p in zoo_calc.module.model.parameters())
    found = {"zoo": (zoo_calc, f"{zoo_name}, {n_params / 1e3:.0f}k params, float32")}
    if compile:
        found["zooc"] = (zoo_calculator(zoo_name, compile=True), f"{zoo_name} through torch.compile (inductor)")
    peers = {
        "xtb": lambda: (xtb_calculator(), "GFN2-xTB (tblite)"),
        "mace": lambda: mace_calculator(n_params),
        "ani1": lambda: (ani_calculator(1), "ANI-2x architecture, 1 network, random weights"),
        "ani8": lambda: (ani_calculator(8), "ANI-2x architecture, 8-network ensemble, random weights"),
    }
    for name, make in peers.items():
        try:
            found[name] = make()
        except ImportError as err:
            print(f"note: {name} skipped, it does not import here ({err})")
    torch.set_num_threads(1)  # a peer's import may have reset it
    return found


# ----------------------------------------------------------------------------- measurements
def ms_per_call(calcs: dict, atoms, repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median ms of one energy+forces call per engine, the engines interleaved call by call, and the seconds of
    each engine's first two calls (for the compiled engine: an eager call that sizes the graph, then its compile)."""
    times = {name: [] for name in calcs}
    images = {name: atoms.copy() for name in calcs}
    first = {}
    for name, calc in calcs.items():
        images[name].calc = calc
        start = time.perf_counter()
        for rep in range(2):  # warm-up
            images[name].rattle(1e-3, seed=1000 + rep)
            images[name].get_forces()
        first[name] = time.perf_counter() - start
    for rep in range(repeats):
        for name, image in images.items():
            image.rattle(1e-3, seed=rep)  # new positions: nothing is reused from the previous call
            start = time.perf_counter()
            image.get_potential_energy()
            image.get_forces()
            times[name].append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}, first


def md_steps_per_s(calcs: dict, atoms, seconds: float, blocks: int, call_ms: dict) -> dict[str, float]:
    """Median MD steps/s (velocity Verlet, 0.5 fs, 300 K start), the engines interleaved block by block."""
    from ase import units
    import numpy as np
    from ase.md.velocitydistribution import thermalize_momenta
    from ase.md.verlet import VelocityVerlet

    rates = {name: [] for name in calcs}
    runs = {}
    for name, calc in calcs.items():
        image = atoms.copy()
        thermalize_momenta(image, temperature_K=300, rng=np.random.default_rng(0))
        image.calc = calc
        runs[name] = VelocityVerlet(image, timestep=0.5 * units.fs)
    for _ in range(blocks):
        for name, dyn in runs.items():
            steps = max(2, int(1e3 * seconds / max(call_ms[name], 1e-3)))
            start = time.perf_counter()
            dyn.run(steps)
            rates[name].append(steps / (time.perf_counter() - start))
    return {name: statistics.median(r) for name, r in rates.items()}


def batch_images() -> list:
    """The batched API's 64 molecules: 8 slightly rattled conformers of each of BATCH_SMILES."""
    images = [embed(smiles, seed) for smiles in BATCH_SMILES for seed in range(8)]
    for image in images:
        image.rattle(0.02, seed=1)
    return images


def batched(calc, repeats: int, compiled=None) -> None:
    """64 molecules of 15-35 atoms: one calculate_many against a loop of single calls, interleaved; with a
    ``compiled`` calculator, also its calculate_many of the same molecules again (one compiled shape for the batch,
    as in batched MD; its first two calls measure the slots and compile)."""
    import numpy as np

    images = batch_images()
    sizes = [len(a) for a in images]

    def loop():
        out = []
        for image in images:
            calc.calculate(image, ["energy", "forces"])
            out.append(dict(calc.results))
        return out

    loop_s, many_s, compiled_s = [], [], []
    one, many = loop(), calc.calculate_many(images)  # warm-up, and the comparison
    if compiled is not None:
        start = time.perf_counter()
        compiled.calculate_many(images)
        many_c = compiled.calculate_many(images)
        warm_up = time.perf_counter() - start
    for _ in range(repeats):
        start = time.perf_counter()
        loop()
        loop_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        calc.calculate_many(images)
        many_s.append(time.perf_counter() - start)
        if compiled is not None:
            start = time.perf_counter()
            compiled.calculate_many(images)
            compiled_s.append(time.perf_counter() - start)
    d_energy = max(abs(a["energy"] - b["energy"]) for a, b in zip(one, many))
    d_forces = max(np.abs(a["forces"] - b["forces"]).max() for a, b in zip(one, many))
    loop_ms, many_ms = 1e3 * statistics.median(loop_s), 1e3 * statistics.median(many_s)
    print(f"\nBatched API: {len(images)} molecules of {min(sizes)}-{max(sizes)} atoms ({sum(sizes)} atoms), "
          f"median of {repeats}, interleaved")
    print(f"  loop of calc.calculate: {loop_ms:8.1f} ms ({loop_ms / len(images):.2f} ms per molecule)")
    print(f"  calc.calculate_many:    {many_ms:8.1f} ms ({many_ms / len(images):.2f} ms per molecule)")
    print(f"  throughput x{loop_ms / many_ms:.2f}; largest difference: energy {d_energy:.2e} eV, "
          f"forces {d_forces:.2e} eV/Å")
    if compiled is not None:
        compiled_ms = 1e3 * statistics.median(compiled_s)
        d_energy = max(abs(a["energy"] - b["energy"]) for a, b in zip(one, many_c))
        d_forces = max(np.abs(a["forces"] - b["forces"]).max() for a, b in zip(one, many_c))
        print(f"  compiled calculate_many: {compiled_ms:7.1f} ms ({compiled_ms / len(images):.2f} ms per molecule; "
              f"{warm_up:.0f} s to measure and compile)")
        print(f"  throughput x{loop_ms / compiled_ms:.2f}; largest difference: energy {d_energy:.2e} eV, "
              f"forces {d_forces:.2e} eV/Å")


def torchsim_nve(model_name: str, n_molecules: int, steps: int, compile: bool = False) -> None:
    """A batched NVE (TorchSim velocity Verlet, 0.5 fs, 300 K start) of different molecules: each one's energy
    drift, and the throughput against ASE's VelocityVerlet running them one by one (with ``compile``, the TorchSim
    model through ``torch.compile``; its first two steps, which measure the slots and compile, are not timed)."""
    import numpy as np
    import torch
    import torch_sim as ts
    from ase import units
    from ase.md.verlet import VelocityVerlet

    import zoo

    module = zoo.load(model_name)
    images = [embed(smiles, seed) for seed in range(4) for smiles in BATCH_SMILES][:n_molecules]
    state = ts.io.atoms_to_state(images, device=torch.device("cpu"), dtype=torch.float64)
    init, update = ts.integrators.nve(module.as_torchsim_model(compile=compile),
                                      dt=torch.tensor(0.5 * units.fs, dtype=torch.float64),
                                      kT=torch.tensor(300 * units.kB, dtype=torch.float64), seed=0)
    state = init(state)
    warm_up = time.perf_counter()
    state = update(state)  # (compiled: the first step compiles)
    warm_up = time.perf_counter() - warm_up
    natoms = torch.bincount(state.system_idx).numpy()

    def total() -> np.ndarray:
        kinetic = ts.quantities.calc_kinetic_energy(masses=state.masses, momenta=state.momenta,
                                                    system_idx=state.system_idx)
        return (state.energy + kinetic).numpy()

    energies = [total()]
    start = time.perf_counter()
    for _ in range(steps):
        state = update(state)
        energies.append(total())
    batched = n_molecules * steps / (time.perf_counter() - start)
    energies = np.array(energies)
    drift = np.polyfit(np.arange(steps + 1) * 0.5e-3, energies, 1)[0] / natoms * 1e3  # meV/atom/ps
    loop_steps = max(2, steps // 20)
    calc = module.as_calculator()
    start = time.perf_counter()
    for atoms in images:
        atoms.calc = calc
        VelocityVerlet(atoms, timestep=0.5 * units.fs).run(loop_steps)
    loop = n_molecules * loop_steps / (time.perf_counter() - start)
    print(f"\nTorchSim NVE: {n_molecules} molecules ({natoms.sum()} atoms, {natoms.min()}-{natoms.max()} each), "
          f"{steps} steps of 0.5 fs after one untimed, float64 state, {model_name} in its own dtype"
          + (f", compiled ({warm_up:.0f} s for the first step)" if compile else ""))
    print(f"  drift (slope of the total energy) per molecule, meV/atom/ps: largest |drift| {np.abs(drift).max():.3f}, "
          f"median {np.median(np.abs(drift)):.3f}")
    print("  " + " ".join(f"{d:+.3f}" for d in drift))
    print(f"  total-energy std per molecule, meV: median {np.median(energies.std(0)) * 1e3:.2f}, "
          f"largest {energies.std(0).max() * 1e3:.2f}")
    print(f"  throughput: batched {batched:.1f} molecule-steps/s, ASE loop {loop:.1f} "
          f"({loop_steps} steps per molecule): x{batched / loop:.2f}")


def scaling(repeats: int) -> None:
    """Forward time of the small config (direct forces, no autograd) on periodic Cu, 1,000 to 4,000 atoms."""
    import numpy as np
    import torch
    from ase.build import bulk

    from zoo.escaip.model import CONFIGS, EScAIP
    from zoo.escaip.module import default_heads

    torch.manual_seed(0)
    model = EScAIP(CONFIGS["small"], default_heads(CONFIGS["small"])).eval()
    seconds = {}
    print("\nScaling: 'small' config (H128 L4, k 20, cutoff 5 Å), direct forces, random weights, periodic fcc Cu; "
          f"CPU seconds of one thread, minimum of {repeats}")
    for reps in [(5, 5, 10), (5, 10, 10), (10, 10, 10)]:
        atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(reps)
        atoms.rattle(0.05, seed=0)
        args = (torch.tensor(atoms.positions, dtype=torch.float32), torch.tensor(atoms.numbers),
                torch.tensor(atoms.cell.array, dtype=torch.float32)[None], torch.ones(1, 3, dtype=torch.bool),
                torch.tensor([len(atoms)]))
        times = []
        with torch.no_grad():
            model(*args)  # warm-up
            for _ in range(repeats):
                start = time.process_time()
                model(*args)
                times.append(time.process_time() - start)
        seconds[len(atoms)] = min(times)
        print(f"  {len(atoms):>5} atoms: {seconds[len(atoms)]:6.2f} s", flush=True)
    n = sorted(seconds)
    slope = np.polyfit(np.log(n), np.log([seconds[k] for k in n]), 1)[0]
    print(f"  forward time grows as atoms^{slope:.2f} from {n[0]} to {n[-1]} atoms")


def compute_floor(model_name: str, sizes, repeats: int) -> None:
    """How far each call is from what its arithmetic alone costs: the matrix-product FLOPs of one energy+forces
    call (torch's FlopCounterMode: mm, bmm, addmm, forward and backward) over this thread's rate on the model's own
    largest product shapes, timed here. No implementation of the same network can run the call faster than that."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    import zoo
    from zoo.escaip.data import atoms_to_batch

    module = zoo.load(model_name)
    cfg = module.cfg
    rows = 336  # atoms x slots of a 21-atom molecule (16 slots): the products' row count there
    shapes = [(rows, cfg.hidden_size, 3 * cfg.hidden_size), (rows, cfg.hidden_size, cfg.hidden_size),
              (rows, cfg.hidden_size * cfg.ffn_hidden_layer_multiplier, cfg.hidden_size), (4096, 1024, 1024)]
    rates = []
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        calls = max(1, int(2e9 / (2 * m * k * n)))  # ~1 s of work at 2 GFLOP/s
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                torch.mm(a, b)
            best = min(best, (time.perf_counter() - start) / calls)
        rates.append(2 * m * k * n / best)
    print(f"\nCompute floor of {model_name}: single-thread sgemm "
          + ", ".join(f"{m}x{k}@{k}x{n} {r / 1e9:.0f}" for (m, k, n), r in zip(shapes, rates)) + " GFLOP/s")
    model_rate = max(rates[:3])  # the model's own shapes, at their best
    print(f"{'atoms':>5} | {'GFLOP/call':>10} | {'floor ms':>8} | {'eager ms':>8} | eager/floor")
    for n, atoms in systems(sizes).items():
        batch = atoms_to_batch([atoms])
        with FlopCounterMode(display=False) as counter:
            module.predict(batch)
        flops = counter.get_total_flops()
        module.predict(batch)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            module.predict(batch)
            times.append(time.perf_counter() - start)
        floor_ms, eager_ms = flops / model_rate * 1e3, statistics.median(times) * 1e3
        print(f"{n:>5} | {flops / 1e9:>10.3f} | {floor_ms:>8.2f} | {eager_ms:>8.2f} | {eager_ms / floor_ms:.1f}",
              flush=True)

    # the batched API: what 5x the loop of single calls leaves for everything but the products
    calc, images = module.as_calculator(), batch_images()
    calc.calculate_many(images)  # warm-up
    with FlopCounterMode(display=False) as counter:
        calc.calculate_many(images)
    flops = counter.get_total_flops() / len(images)
    loop_s, many_s = [], []
    for _ in range(max(3, repeats // 5)):
        start = time.perf_counter()
        for image in images:
            calc.calculate(image, ["energy", "forces"])
        loop_s.append((time.perf_counter() - start) / len(images))
        start = time.perf_counter()
        calc.calculate_many(images)
        many_s.append((time.perf_counter() - start) / len(images))
    loop_ms, many_ms = statistics.median(loop_s) * 1e3, statistics.median(many_s) * 1e3
    print(f"\n{len(images)} molecules, per molecule: {flops / 1e9:.3f} GFLOP, floor {flops / model_rate * 1e3:.2f} ms; "
          f"loop of single calls {loop_ms:.2f} ms (5x the loop: {loop_ms / 5:.2f} ms), calculate_many {many_ms:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="escaip-qm9-xtb")
    parser.add_argument("--sizes", type=int, nargs="+", default=[*MOLECULES, WATER_CLUSTER],
                        choices=[*MOLECULES, WATER_CLUSTER])
    parser.add_argument("--repeats", type=int, default=15,
                        help="timed calls per engine and size (a fifth of them, at least 3, at 501 atoms)")
    parser.add_argument("--md-seconds", type=float, default=0.5, help="about this long per MD block")
    parser.add_argument("--md-blocks", type=int, default=3, help="MD blocks per engine and size")
    parser.add_argument("--skip-batched", action="store_true")
    parser.add_argument("--quick", action="store_true", help="9, 21 and 60 atoms, 9 repeats, 2 MD blocks")
    parser.add_argument("--compile", action="store_true",
                        help="also the zoo through torch.compile (zooc); with --torchsim, the TorchSim model compiled")
    parser.add_argument("--scaling", action="store_true",
                        help="only the forward-time scaling of the small config, 1,000 to 4,000 atoms")
    parser.add_argument("--floor", action="store_true",
                        help="only the compute floor: matrix-product FLOPs per call and per batched molecule "
                             "over this thread's sgemm rate")
    parser.add_argument("--torchsim", type=int, nargs=2, metavar=("MOLECULES", "STEPS"),
                        help="only a batched TorchSim NVE run (e.g. 32 2000; needs torch-sim-atomistic)")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.repeats, args.md_blocks = [9, 21, 60], 9, 2
    if args.torchsim:
        import torch

        torch.set_num_threads(1)
        torchsim_nve(args.model, *args.torchsim, compile=args.compile)
        return
    if args.floor:
        import torch

        torch.set_num_threads(1)
        compute_floor(args.model, args.sizes, args.repeats)
        return
    if args.scaling:
        import torch

        torch.set_num_threads(1)
        scaling(repeats=2)
        return

    import torch

    calcs = engines(args.model, args.compile)
    torch.set_num_threads(1)
    print(f"threads: torch {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")
    for name, (_, label) in calcs.items():
        print(f"  {name:5s} {label}")
    calcs = {name: calc for name, (calc, _) in calcs.items()}
    zoos = [name for name in calcs if name.startswith("zoo")]
    peers = [name for name in calcs if name not in zoos]
    ratios = [(z, p) for z in zoos for p in peers]
    head = (f"{'atoms':>5} | " + " ".join(f"{n + ' ms':>9}" for n in calcs) + " | "
            + " ".join(f"{n + ' st/s':>10}" for n in calcs) + " | "
            + " ".join(f"{z + '/' + p:>9}" for z, p in ratios) + (" | compile s" if "zooc" in calcs else ""))
    print(f"\nms per energy+forces call (median of {args.repeats} calls) and MD steps/s (median of {args.md_blocks} "
          f"blocks of ~{args.md_seconds} s); 'Z/X' = Z's MD steps/s over X's")
    print(head)
    print("-" * len(head))
    for n, atoms in systems(args.sizes).items():
        # a 501-atom xTB call takes seconds: fewer repeats there
        call, first = ms_per_call(calcs, atoms, args.repeats if n < 200 else max(3, args.repeats // 5))
        rate = md_steps_per_s(calcs, atoms, args.md_seconds, args.md_blocks, call)
        print(f"{n:>5} | " + " ".join(f"{call[k]:>9.2f}" for k in calcs) + " | "
              + " ".join(f"{rate[k]:>10.3g}" for k in calcs) + " | "
              + " ".join(f"{rate[z] / rate[p]:>9.2f}" for z, p in ratios)
              + (f" | {first['zooc']:9.0f}" if "zooc" in calcs else ""), flush=True)
    if not args.skip_batched:
        batched(calcs["zoo"], max(3, args.repeats // 5), calcs.get("zooc"))


if __name__ == "__main__":
    main()
