"""``zoo escaip make-data``: labelled MD frames for training EScAIP potentials.

* small organic molecules and water clusters: Langevin MD, energies and forces from GFN2-xTB (``tblite``);
* periodic metal slabs with adsorbates: Langevin MD with ASE's EMT (energies, forces, stress).

Every trajectory is a job run by a worker process (``OMP_NUM_THREADS=1`` each) and written in segments of
frames (``<out>/<kind>/<system>/T<temperature>_s<seed>/seg_00000.extxyz``, each file written atomically).
A segment's frames carry momenta, so a rerun resumes every trajectory from its last complete segment.
``manifest.json`` records the settings and seeds. No torch here: workers stay light.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

__all__ = ["Job", "MOLECULES", "SLABS", "build_system", "plan_jobs", "run_job", "make_data"]


# ============================================================================= systems
def _ring(centres: list[tuple[float, float]], bond: float = 1.39) -> np.ndarray:
    """Vertices of fused regular hexagons (flat, z = 0) around the given centres, deduplicated."""
    pts: list[np.ndarray] = []
    for cx, cy in centres:
        for k in range(6):
            p = np.array([cx + bond * math.cos(math.pi / 6 + k * math.pi / 3),
                          cy + bond * math.sin(math.pi / 6 + k * math.pi / 3), 0.0])
            if all(np.linalg.norm(p - q) > 0.1 for q in pts):
                pts.append(p)
    return np.array(pts)


# substituent groups in the local frame (u: away from the ring, t: in plane, n: normal), in Å
_TETRA = [(0.363, 1.028 * math.cos(phi), 1.028 * math.sin(phi)) for phi in (0, 2 * math.pi / 3, 4 * math.pi / 3)]
_GROUPS: dict[str, list[tuple[str, tuple[float, float, float]]]] = {
    "H": [("H", (1.09, 0, 0))],
    "=O": [("O", (1.22, 0, 0))],
    "OH": [("O", (1.36, 0, 0)), ("H", (1.36 + 0.485, 0.84, 0))],
    "NH": [("H", (1.01, 0, 0))],
    "CH3": [("C", (1.51, 0, 0))] + [("H", (1.51 + a, b, c)) for a, b, c in _TETRA],
    "COOH": [("C", (1.48, 0, 0)), ("O", (1.48 + 0.61, 1.06, 0)), ("O", (1.48 + 0.67, -1.16, 0)),
             ("H", (1.48 + 0.67 + 0.97, -1.16, 0))],
}


def _decorated_ring(centres, ring_elements: list[str], substituents: dict[int, str]):
    """A planar ring system with substituents on the given ring atoms (a rough start for an xTB relaxation)."""
    from ase import Atoms

    ring = _ring(centres)
    symbols, positions = list(ring_elements), [p for p in ring]
    for i, group in substituents.items():
        neighbours = [q for j, q in enumerate(ring) if j != i and np.linalg.norm(q - ring[i]) < 1.6]
        u = ring[i] - np.mean(neighbours, axis=0)
        u /= np.linalg.norm(u)
        n = np.array([0.0, 0.0, 1.0])
        t = np.cross(n, u)
        for element, (a, b, c) in _GROUPS[group]:
            symbols.append(element)
            positions.append(ring[i] + a * u + b * t + c * n)
    return Atoms(symbols, positions=positions)


def _water_cluster(n: int, seed: int):
    """n water molecules at random orientations, no O-O pair closer than 2.7 Å."""
    from ase import Atoms
    from ase.build import molecule

    rng = np.random.default_rng(seed)
    radius = 1.6 * n ** (1 / 3) + 1.0
    cluster = Atoms()
    oxygens: list[np.ndarray] = []
    while len(oxygens) < n:
        centre = rng.uniform(-radius, radius, 3)
        if np.linalg.norm(centre) > radius or any(np.linalg.norm(centre - o) < 2.7 for o in oxygens):
            continue
        water = molecule("H2O")
        water.rotate(rng.uniform(0, 360), rng.normal(size=3))
        water.translate(centre - water.positions[0])
        oxygens.append(centre)
        cluster += water
    return cluster


def _molecule(name: str):
    from ase.build import molecule

    return molecule(name)


# name -> (builder, builder argument)
MOLECULES: dict[str, tuple] = {
    "ethanol": (_molecule, "CH3CH2OH"),
    "benzene": (_molecule, "C6H6"),
    "acetic_acid": (_molecule, "CH3COOH"),
    "pyridine": (_molecule, "C5H5N"),
    "furan": (_molecule, "C4H4O"),
    "acetamide": (_molecule, "CH3CONH2"),
    "toluene": (_decorated_ring, ([(0, 0)], ["C"] * 6, {0: "CH3", 1: "H", 2: "H", 3: "H", 4: "H", 5: "H"})),
    "phenol": (_decorated_ring, ([(0, 0)], ["C"] * 6, {0: "OH", 1: "H", 2: "H", 3: "H", 4: "H", 5: "H"})),
    "naphthalene": (_decorated_ring, ([(0, 0), (math.sqrt(3) * 1.39, 0)], ["C"] * 10,
                                      {1: "H", 2: "H", 3: "H", 4: "H", 6: "H", 7: "H", 8: "H", 9: "H"})),
    "salicylic_acid": (_decorated_ring, ([(0, 0)], ["C"] * 6, {0: "COOH", 1: "OH", 2: "H", 3: "H", 4: "H", 5: "H"})),
    "uracil": (_decorated_ring, ([(0, 0)], ["N", "C", "N", "C", "C", "C"],
                                 {0: "NH", 1: "=O", 2: "NH", 3: "=O", 4: "H", 5: "H"})),
    "malonaldehyde": (_decorated_ring, ([(0, 0)], ["O", "C", "C", "C", "O", "H"], {1: "H", 2: "H", 3: "H"})),
    "water3": (_water_cluster, 3),
    "water6": (_water_cluster, 6),
}

# EMT metals and adsorbates: name -> (metal, facet, adsorbate, site)
SLABS: dict[str, tuple[str, str, str, str]] = {
    "cu111_o": ("Cu", "fcc111", "O", "fcc"),
    "cu100_h": ("Cu", "fcc100", "H", "hollow"),
    "pt111_co": ("Pt", "fcc111", "CO", "ontop"),
    "pd111_h": ("Pd", "fcc111", "H", "fcc"),
    "ni111_n": ("Ni", "fcc111", "N", "hcp"),
    "ag100_o": ("Ag", "fcc100", "O", "hollow"),
    "au111_c": ("Au", "fcc111", "C", "fcc"),
    "al111_o": ("Al", "fcc111", "O", "fcc"),
}


def build_system(kind: str, name: str, seed: int = 0):
    """The starting structure of a job (molecules unrelaxed, slabs periodic with 7 Å of vacuum)."""
    if kind == "xtb":
        if name not in MOLECULES:
            raise ValueError(f"unknown molecule {name!r}; choose from {sorted(MOLECULES)}")
        builder, arg = MOLECULES[name]
        atoms = builder(*arg) if isinstance(arg, tuple) else (builder(arg, seed) if builder is _water_cluster else builder(arg))
        atoms.center()
        return atoms
    if name not in SLABS:
        raise ValueError(f"unknown slab {name!r}; choose from {sorted(SLABS)}")
    from ase.build import add_adsorbate, fcc100, fcc111, molecule
    from ase.constraints import FixAtoms

    metal, facet, adsorbate, site = SLABS[name]
    slab = {"fcc111": fcc111, "fcc100": fcc100}[facet](metal, (3, 3, 4), vacuum=7.0, periodic=True)
    ads = molecule(adsorbate) if len(adsorbate) > 1 else adsorbate
    add_adsorbate(slab, ads, 1.5 if adsorbate != "H" else 1.0, site)
    slab.constraints = [FixAtoms(indices=[a.index for a in slab if a.tag == 4])]  # the bottom layer
    slab.center(vacuum=7.0, axis=2)
    slab.info.pop("adsorbate_info", None)  # not extxyz-serialisable
    return slab


# ============================================================================= jobs
@dataclass(frozen=True)
class Job:
    kind: str  # "xtb" or "emt"
    name: str
    temperature: float
    seed: int
    n_frames: int
    stride: int  # MD steps between saved frames
    timestep_fs: float
    segment_frames: int

    @property
    def folder(self) -> str:
        return f"{self.kind}/{self.name}/T{int(self.temperature)}_s{self.seed}"

    @property
    def n_segments(self) -> int:
        return math.ceil(self.n_frames / self.segment_frames)


def plan_jobs(molecules, slabs, temperatures, seeds: int, frames: int, slab_frames: int, stride: int,
              segment_frames: int) -> list[Job]:
    """Seed-major order: a run stopped early still covers every system and temperature."""
    jobs = []
    for s in range(seeds):
        for t in temperatures:
            jobs += [Job("xtb", name, float(t), s, frames, stride, 0.5, segment_frames) for name in molecules]
            jobs += [Job("emt", name, float(t), s, slab_frames, stride, 1.0, segment_frames) for name in slabs]
    return jobs


def _segments_done(out: Path, job: Job) -> list[Path]:
    folder = out / job.folder
    done = sorted(folder.glob("seg_*.extxyz")) if folder.exists() else []
    return done[: job.n_segments]


def _calculator(kind: str):
    if kind == "xtb":
        try:
            from tblite.ase import TBLite
        except ImportError:
            raise ImportError("GFN2-xTB labels need tblite: pip install tblite") from None
        return TBLite(method="GFN2-xTB", verbosity=0)
    from ase.calculators.emt import EMT

    return EMT()


def run_job(job: Job, out: str, progress=None) -> int:
    """Run (or resume) one trajectory; returns the number of frames written by this call."""
    os.environ["OMP_NUM_THREADS"] = "1"
    import ase.io
    from ase import units
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.md.langevin import Langevin
    from ase.md.velocitydistribution import Stationary, ZeroRotation, thermalize_momenta
    from ase.optimize import BFGS

    out_path = Path(out)
    done = _segments_done(out_path, job)
    if len(done) >= job.n_segments:
        return 0
    atoms = build_system(job.kind, job.name, job.seed)
    atoms.calc = _calculator(job.kind)
    if done:
        last = ase.io.read(str(done[-1]), index=-1)
        atoms.positions = last.positions
        atoms.set_momenta(last.get_momenta())
    else:
        BFGS(atoms, logfile=None).run(fmax=0.1, steps=200)
        thermalize_momenta(atoms, temperature_K=job.temperature, rng=np.random.default_rng(job.seed))
        Stationary(atoms)
        if job.kind == "xtb":
            ZeroRotation(atoms)
    written = 0
    periodic = bool(atoms.pbc.all())
    for seg in range(len(done), job.n_segments):
        # a fresh, seeded thermostat per segment keeps resumed runs reproducible
        rng = np.random.default_rng([job.seed, seg, int(job.temperature)])
        dyn = Langevin(atoms, timestep=job.timestep_fs * units.fs, temperature_K=job.temperature,
                       friction=0.01 / units.fs, fixcm=False, rng=rng)
        frames = []
        n = min(job.segment_frames, job.n_frames - seg * job.segment_frames)
        for k in range(n):
            dyn.run(job.stride)
            frame = atoms.copy()
            frame.constraints = []
            results = {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces(apply_constraint=False)}
            if periodic:
                results["stress"] = atoms.get_stress()
            frame.calc = SinglePointCalculator(frame, **results)
            frame.info.update(system=job.name, temperature=job.temperature, seed=job.seed,
                              step=(seg * job.segment_frames + k + 1) * job.stride)
            frames.append(frame)
            if not np.all(np.isfinite(frame.positions)) or np.abs(results["forces"]).max() > 1e3:
                raise RuntimeError(f"{job.folder}: the MD blew up at segment {seg}")
        folder = out_path / job.folder
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".seg.", suffix=".extxyz", dir=folder)
        os.close(fd)
        try:
            ase.io.write(tmp, frames, format="extxyz")
            os.replace(tmp, folder / f"seg_{seg:05d}.extxyz")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        # continue from the state as written, so a resumed run is identical to an uninterrupted one
        last = ase.io.read(str(folder / f"seg_{seg:05d}.extxyz"), index=-1)
        atoms.positions = last.positions
        atoms.set_momenta(last.get_momenta())
        written += n
        if progress is not None:
            progress.put(n)
    return written


def _worker(args) -> tuple[str, int, str | None]:
    job, out, queue = args
    try:
        return job.folder, run_job(job, out, queue), None
    except Exception as err:  # report and carry on with the other trajectories
        return job.folder, 0, f"{type(err).__name__}: {err}"


def make_data(out: str | os.PathLike, jobs: list[Job], workers: int = 1) -> dict:
    """Run every job (skipping finished segments) with a process pool; a tqdm bar counts frames."""
    import multiprocessing as mp
    import threading

    from tqdm import tqdm

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"jobs": [asdict(j) for j in jobs], "labels": {"xtb": "GFN2-xTB (tblite)", "emt": "ASE EMT"}}
    tmp = out / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, out / "manifest.json")

    total = sum(j.n_frames for j in jobs)
    already = sum(min(len(_segments_done(out, j)) * j.segment_frames, j.n_frames) for j in jobs)
    todo = [j for j in jobs if len(_segments_done(out, j)) < j.n_segments]
    errors = {}
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, tqdm(total=total, initial=already, unit="frame", desc="make-data") as bar:
        queue = manager.Queue()

        def follow():
            while (n := queue.get()) is not None:
                bar.update(n)

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        if workers <= 1:
            results = [_worker((j, str(out), queue)) for j in todo]
        else:
            with ctx.Pool(workers) as pool:
                results = list(pool.imap_unordered(_worker, [(j, str(out), queue) for j in todo]))
        queue.put(None)
        reader.join()
    for folder, _, err in results:
        if err:
            errors[folder] = err
    frames = sum(min(len(_segments_done(out, j)) * j.segment_frames, j.n_frames) for j in jobs)
    return {"frames": frames, "total": total, "errors": errors}
