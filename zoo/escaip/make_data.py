"""``zoo escaip make-data``: labelled frames for training EScAIP potentials.

* named small organic molecules and water clusters: Langevin MD, energies and forces from GFN2-xTB (``tblite``);
* periodic metal slabs with adsorbates: Langevin MD with ASE's EMT (energies, forces, stress);
* QM9 molecules (``--qm9 N``, from PyPI's ``qm9pack``) or those a SMILES list names (``--smiles FILE``, RDKit
  conformers): per molecule a short GFN2-xTB MD plus displaced copies, in blocks of molecules (the unit of splits);
  molecule pairs of a block at contact distances; strained, rattled EMT bulk metals (stress). No molecule has the
  formula of one in ASE's ``g2`` collection (the test set).

Each trajectory (or block) is a job for a worker process (``OMP_NUM_THREADS=1``), written in segments
(``<out>/<kind>/<system>/T<temperature>_s<seed>/seg_00000.extxyz``, each written atomically). MD frames carry
momenta, so a rerun resumes every trajectory from its last complete segment. No torch here: workers stay light.
"""

from __future__ import annotations

import ast
import csv
import functools
import importlib.util
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from zoo._cli import option
from zoo.errors import StorageError
from zoo.io import atomic_path, write_text_atomic

__all__ = ["Job", "MOLECULES", "SLABS", "METALS", "build_system", "DataPlan", "plan_jobs", "plan_qm9_jobs",
           "select_qm9", "select_smiles", "smiles_lines", "write_selection", "g2_formulas", "g2_test_molecules",
           "run_job", "make_data"]


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


def g2_test_molecules() -> list[str]:
    """The g2 molecules a zoo potential is tested on: closed-shell (no initial magnetic moments; the potentials
    have no spin input), more than one atom, elements H C N O F only."""
    from ase.collections import g2

    return [name for name in g2.names if len(g2[name]) > 1 and not g2[name].get_initial_magnetic_moments().any()
            and set(g2[name].get_chemical_symbols()) <= QM9_ELEMENTS]


def build_system(kind: str, name: str, seed: int = 0):
    """The starting structure of a job (molecules unrelaxed, slabs periodic with 7 Å of vacuum)."""
    if kind == "emt":
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
    if kind == "g2":
        atoms = _molecule(name)
        atoms.set_initial_magnetic_moments(None)
    elif name in MOLECULES:
        builder, arg = MOLECULES[name]
        atoms = builder(*arg) if isinstance(arg, tuple) else (builder(arg, seed) if builder is _water_cluster else builder(arg))
    else:
        raise ValueError(f"unknown molecule {name!r}; choose from {sorted(MOLECULES)}")
    atoms.center()
    return atoms


# ============================================================================= QM9, pairs, bulk metals
#: fcc metals of ASE's EMT, as strained bulk cells (stress labels for cell relaxations)
METALS = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")
QM9_ELEMENTS = frozenset("HCNOF")
SELECTION = "qm9_selection.json"  # the chosen molecules, in block order, written once per output folder


def g2_formulas() -> frozenset[str]:
    """Formulas of every molecule in ASE's ``g2`` collection: a QM9 molecule with one of these is left out (its
    isomers too), so the g2 test set stays unseen."""
    from ase.collections import g2

    return frozenset(atoms.get_chemical_formula() for atoms in g2)


def _qm9_rows(source: str | os.PathLike | None):
    """(index, smiles, symbols, positions) of every QM9 molecule: qm9pack's CSV columns Index, SMILES, Elements,
    XYZ_Ang (Å, Python literals such as ``0.``)."""
    if source is None:  # the CSV files qm9pack ships, found without importing it (its import pulls in pandas)
        spec = importlib.util.find_spec("qm9pack")
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError("QM9 molecules come from the qm9pack package: pip install qm9pack "
                                    "(or pass --qm9-source with its qm9_part*.csv files)")
        source = Path(next(iter(spec.submodule_search_locations))) / "data"
    source = Path(source)
    files = sorted(source.glob("qm9_part*.csv")) if source.is_dir() else [source]
    if not files or not all(f.is_file() for f in files):
        raise FileNotFoundError(f"no QM9 CSV files (qm9_part*.csv) at {source}")
    csv.field_size_limit(1 << 30)
    for path in files:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                yield int(row["Index"]), row["SMILES"], ast.literal_eval(row["Elements"]), ast.literal_eval(row["XYZ_Ang"])


def select_qm9(n: int, seed: int = 0, source: str | os.PathLike | None = None) -> list[dict]:
    """``n`` QM9 molecules for training, none with a g2 formula. QM9 is mostly 8-9 heavy atoms, while small
    molecules carry the chemistry of small test molecules: every molecule of up to 5 heavy atoms is taken, the
    rest is drawn evenly across heavy-atom counts, with fluorine compounds drawn to at least 15%."""
    from ase.formula import Formula

    rng = np.random.default_rng(seed)
    excluded = g2_formulas()
    by_heavy: dict[tuple[int, bool], list[dict]] = {}
    for index, smiles, symbols, positions in _qm9_rows(source):
        if not set(symbols) <= QM9_ELEMENTS or str(Formula.from_list(symbols).format("hill")) in excluded:
            continue
        heavy = sum(e != "H" for e in symbols)
        by_heavy.setdefault((heavy, "F" in symbols), []).append(
            {"index": index, "smiles": smiles, "symbols": symbols, "positions": positions})
    chosen = [m for (heavy, _), mols in sorted(by_heavy.items()) if heavy <= 5 for m in mols][:n]
    rest = {key: mols for key, mols in by_heavy.items() if key[0] > 5}
    want = n - len(chosen)
    for fluorine, share in ((True, 0.15), (False, 1.0)):
        groups = [key for key in sorted(rest) if key[1] == fluorine]
        quota = round(want * share)
        taken = 0
        while taken < quota and any(rest[k] for k in groups):  # round-robin over heavy-atom counts
            for key in groups:
                if rest[key] and taken < quota:
                    chosen.append(rest[key].pop(int(rng.integers(len(rest[key])))))
                    taken += 1
        want -= taken
    order = rng.permutation(len(chosen))  # blocks mix sizes, so any block split is a fair sample
    return [chosen[i] for i in order]


def smiles_lines(path: str | os.PathLike) -> list[tuple[int, str]]:
    """(line number, SMILES) of each molecule of a SMILES list: one per line, SMILES then an optional name; a line
    that starts with ``#`` is a comment (only whole lines: ``#`` is SMILES' triple bond)."""
    rows = [(lineno, line.split()) for lineno, line in enumerate(Path(path).read_text().splitlines(), 1)]
    return [(lineno, fields[0]) for lineno, fields in rows if fields and not fields[0].startswith("#")]


def select_smiles(path: str | os.PathLike, seed: int = 0) -> list[dict]:
    """The molecules a SMILES list (:func:`smiles_lines`) names, in the form :func:`select_qm9` gives, for chemistry
    QM9 lacks (it has no terminal =CH2, no cumulene, no O-F bond). The geometry is an RDKit conformer (ETKDG, then
    MMFF). A g2 formula or another element is an error."""
    from ase.formula import Formula

    try:
        from rdkit import Chem
        from rdkit.Chem import AllChem
    except ImportError:
        raise ImportError("--smiles needs RDKit: pip install rdkit") from None
    excluded, molecules = g2_formulas(), []
    for lineno, smiles in smiles_lines(path):
        where = f"{path}:{lineno}"
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            raise ValueError(f"{where}: RDKit cannot parse the SMILES {smiles!r}")
        mol = Chem.AddHs(mol)
        if AllChem.EmbedMolecule(mol, randomSeed=seed) != 0:
            raise ValueError(f"{where}: RDKit found no 3D conformer for {smiles!r}")
        AllChem.MMFFOptimizeMolecule(mol)
        symbols = [atom.GetSymbol() for atom in mol.GetAtoms()]
        formula = str(Formula.from_list(symbols).format("hill"))
        if not set(symbols) <= QM9_ELEMENTS:
            raise ValueError(f"{where}: {smiles} has elements {sorted(set(symbols) - QM9_ELEMENTS)}; "
                             f"the molecules are {', '.join(sorted(QM9_ELEMENTS))} only")
        if formula in excluded:
            raise ValueError(f"{where}: {smiles} has the formula {formula} of a g2 molecule (the test set); remove it")
        molecules.append({"index": lineno, "smiles": smiles, "symbols": symbols,
                          "positions": mol.GetConformer().GetPositions().tolist()})
    if not molecules:
        raise ValueError(f"{path} names no molecule")
    return molecules


def write_selection(out: str | os.PathLike, select, n: int) -> None:
    """Write ``select()`` (the molecules) once: a rerun keeps the existing selection, so a resumed run sees the
    same molecules; a rerun asking for a different number of them is an error."""
    path = Path(out) / SELECTION
    if path.exists():
        have = len(json.loads(path.read_text()))
        if have != n:
            raise ValueError(f"{out} holds a selection of {have} molecules, not {n}: rerun with the same molecules "
                             f"(--qm9 {have}, or the same --smiles list), or use a new output folder")
        return
    write_text_atomic(path, json.dumps(select()))


@functools.lru_cache(maxsize=2)
def _selection(out: str) -> list[dict]:
    return json.loads((Path(out) / SELECTION).read_text())


def _qm9_atoms(molecule: dict):
    from ase import Atoms

    atoms = Atoms(molecule["symbols"], positions=molecule["positions"])
    atoms.info.update(qm9_index=molecule["index"], smiles=molecule["smiles"])
    return atoms


def _pair(a, b, distance: float, rng: np.random.Generator):
    """``b`` at a random orientation on a random side of ``a``, shifted until the closest atoms are
    ``distance`` Å apart."""
    from scipy.spatial.transform import Rotation

    a, b = a.copy(), b.copy()
    a.positions -= a.positions.mean(axis=0)
    b.positions = (b.positions - b.positions.mean(axis=0)) @ Rotation.random(random_state=rng.integers(1 << 31)).as_matrix().T
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    lo, hi = 0.0, 30.0
    for _ in range(50):  # bisection on the shift along direction: the closest distance grows with it
        mid = 0.5 * (lo + hi)
        closest = np.linalg.norm(a.positions[:, None] - (b.positions + mid * direction)[None], axis=-1).min()
        lo, hi = (mid, hi) if closest < distance else (lo, mid)
    b.positions += hi * direction
    pair = a + b
    pair.info = {"smiles": f"{a.info.get('smiles')}.{b.info.get('smiles')}", "contact": distance}
    return pair


# ============================================================================= jobs
@dataclass(frozen=True)
class Job:
    kind: str  # "xtb", "emt", "g2", "qm9", "pair" or "bulk"
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
    """MD of named systems, seed-major: a run stopped early still covers every system and temperature."""
    jobs = []
    for s in range(seeds):
        for t in temperatures:
            jobs += [Job("xtb", name, float(t), s, frames, stride, 0.5, segment_frames) for name in molecules]
            jobs += [Job("emt", name, float(t), s, slab_frames, stride, 1.0, segment_frames) for name in slabs]
    return jobs


PAIR_CONTACTS = (2.2, 2.8, 3.6)  # Å between the closest atoms of two molecules, each jittered by ±0.2
WARMUP_STEPS = 20  # MD steps from the QM9 geometry before the first saved frame


def plan_qm9_jobs(n_molecules: int, per_block: int, temperatures, frames: int, stride: int, seed: int = 0,
                  pairs: bool = True, metals=METALS, bulk_frames: int = 100, segment_frames: int = 25) -> list[Job]:
    """Blocks of ``per_block`` selected molecules (``frames`` per molecule: two thirds MD, one third displaced
    copies), the temperature cycling over blocks; with ``pairs``, one pair of the block's molecules per molecule
    at each of PAIR_CONTACTS; then strained bulk cells of each EMT metal."""
    jobs = []
    for first in range(0, n_molecules, per_block):
        count, t = min(per_block, n_molecules - first), float(temperatures[(first // per_block) % len(temperatures)])
        jobs.append(Job("qm9", f"m{first:05d}", t, seed, count * frames, stride, 0.5, frames))
        if pairs:
            jobs.append(Job("pair", f"m{first:05d}", 0.0, seed, count * len(PAIR_CONTACTS), 0, 0.0, len(PAIR_CONTACTS)))
    jobs += [Job("bulk", metal, 0.0, seed, bulk_frames, 0, 0.0, segment_frames) for metal in metals]
    return jobs


@dataclass(kw_only=True)
class DataPlan:
    """What one run makes; each field is also a ``zoo escaip make-data`` option, with this help."""

    qm9: int | None = option(None, "N QM9 molecules (no g2 formula) in blocks, with molecule pairs and strained EMT "
                             "bulk metals, instead of the named systems; needs `pip install qm9pack`", metavar="N",
                             one_of="mode")
    smiles: str | None = option(None, "as --qm9, for the molecules a SMILES list names (one per line, RDKit "
                                "conformers; no g2 formula); needs `pip install rdkit`", metavar="FILE", one_of="mode")
    g2: bool = option(False, "the g2 test set instead: xTB MD of every closed-shell H/C/N/O/F g2 molecule (defaults: "
                      "500 K, 25 frames, stride 40)", one_of="mode")
    molecules: list[str] | None = option(None, "molecule names (default: all; `--molecules` alone: none)", nargs="*")
    slabs: list[str] | None = option(None, "slab names (default: all; `--slabs` alone: none)", nargs="*")
    temperatures: list[float] | None = option(None, "thermostat temperatures, K (default: 300 500 800; --qm9: 300 600 "
                                              "1000, cycled over blocks)")
    seeds: int = option(2, "trajectories per named system and temperature")
    frames: int | None = option(None, "frames per trajectory (default: 300; --qm9: 9 per molecule, two thirds MD and "
                                "one third displaced copies)")
    slab_frames: int = option(100, "frames per slab trajectory, or per bulk metal (--qm9)")
    stride: int | None = option(None, "MD steps between saved frames (default: 10; --qm9: 8)")
    segment_frames: int = option(25, "frames per resumable segment file")
    qm9_source: str | None = option(None, "folder of qm9pack's qm9_part*.csv (default: the installed qm9pack)")
    block_molecules: int = option(50, "--qm9: molecules per block (the unit of splits)")
    no_pairs: bool = option(False, "--qm9: no molecule pairs")
    metals: list[str] | None = option(None, "--qm9: EMT bulk metals (default: all; `--metals` alone: none)", nargs="*")
    seed: int = option(0, "--qm9 and --g2: seed of the selection and the MD")

    def jobs(self, out: str | os.PathLike) -> list[Job]:
        """The jobs: ``qm9`` molecules or a ``smiles`` list (the selection is written to ``out`` once), the ``g2``
        test set, or else the named molecules and slabs."""
        temperatures, frames, stride, seed = self.temperatures, self.frames, self.stride, self.seed
        if self.qm9 is not None or self.smiles:
            metals = list(METALS) if self.metals is None else self.metals
            unknown = sorted(set(metals) - set(METALS))
            if (self.qm9 is not None and self.qm9 < 1) or unknown:
                raise ValueError(f"unknown metals {unknown}; choose from {list(METALS)}" if unknown
                                 else "--qm9 needs a positive number of molecules")
            # the selection is made once (a resumed run reads it back), so the count comes without building molecules
            if self.smiles:
                n_molecules, select = len(smiles_lines(self.smiles)), lambda: select_smiles(self.smiles, seed)
            else:
                n_molecules, select = self.qm9, lambda: select_qm9(self.qm9, seed, self.qm9_source)
            write_selection(out, select, n_molecules)
            return plan_qm9_jobs(n_molecules, self.block_molecules, temperatures or [300.0, 600.0, 1000.0],
                                 frames or 9, stride or 8, seed, not self.no_pairs, metals, self.slab_frames,
                                 self.segment_frames)
        if self.g2:
            frames = frames or 25
            return [Job("g2", name, float(t), seed, frames, stride or 40, 0.5, frames)
                    for name in g2_test_molecules() for t in temperatures or [500.0]]
        molecules = sorted(MOLECULES) if self.molecules is None else self.molecules
        slabs = sorted(SLABS) if self.slabs is None else self.slabs
        unknown = sorted(set(molecules) - set(MOLECULES)) + sorted(set(slabs) - set(SLABS))
        if unknown:
            raise ValueError(f"unknown systems {unknown}; see `zoo escaip make-data OUT --list`")
        return plan_jobs(molecules, slabs, temperatures or [300.0, 500.0, 800.0], self.seeds, frames or 300,
                         self.slab_frames, stride or 10, self.segment_frames)


XTB_KINDS = ("xtb", "qm9", "pair", "g2")  # the job kinds GFN2-xTB labels; EMT labels the others


def _segments_done(out: Path, job: Job) -> list[Path]:
    return sorted((out / job.folder).glob("seg_*.extxyz"))[: job.n_segments]


def _frames_done(out: Path, jobs: list[Job]) -> int:
    return sum(min(len(_segments_done(out, j)) * j.segment_frames, j.n_frames) for j in jobs)


def _calculator(kind: str):
    if kind in XTB_KINDS:
        try:
            from tblite.ase import TBLite
        except ImportError:
            raise ImportError("GFN2-xTB labels need tblite: pip install tblite") from None
        return TBLite(method="GFN2-xTB", verbosity=0)
    from ase.calculators.emt import EMT

    return EMT()


def _labelled(atoms, **info):
    """A copy of ``atoms`` holding its calculator's energy, forces (and stress when periodic) as fixed results."""
    from ase.calculators.singlepoint import SinglePointCalculator

    frame = atoms.copy()
    frame.constraints = []
    results = {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces(apply_constraint=False)}
    if atoms.pbc.all():
        results["stress"] = atoms.get_stress()
    if not np.all(np.isfinite(frame.positions)) or np.abs(results["forces"]).max() > 1e3:
        raise RuntimeError(f"{info['system']}: the structure blew up")
    frame.calc = SinglePointCalculator(frame, **results)
    frame.info.update(info)
    return frame


def _langevin(atoms, job: Job, rng: np.random.Generator):
    from ase import units
    from ase.md.langevin import Langevin

    return Langevin(atoms, timestep=job.timestep_fs * units.fs, temperature_K=job.temperature,
                    friction=0.01 / units.fs, fixcm=False, rng=rng)


def _md_segments(job: Job, out: str, first_seg: int):
    """Yield (segment, frames) of a named system's trajectory from segment ``first_seg`` on."""
    import ase.io
    from ase.md.velocitydistribution import Stationary, ZeroRotation, thermalize_momenta
    from ase.optimize import BFGS

    atoms = build_system(job.kind, job.name, job.seed)
    atoms.calc = _calculator(job.kind)
    if first_seg == 0:
        BFGS(atoms, logfile=None).run(fmax=0.1, steps=200)
        thermalize_momenta(atoms, temperature_K=job.temperature, rng=np.random.default_rng(job.seed))
        Stationary(atoms)
        if job.kind != "emt":
            ZeroRotation(atoms)
    for seg in range(first_seg, job.n_segments):
        if seg:  # on from the segment before as written: a resumed run is an uninterrupted one
            last = ase.io.read(str(Path(out) / job.folder / f"seg_{seg - 1:05d}.extxyz"), index=-1)
            atoms.positions = last.positions
            atoms.set_momenta(last.get_momenta())
        # a fresh, seeded thermostat per segment keeps resumed runs reproducible
        dyn = _langevin(atoms, job, np.random.default_rng([job.seed, seg, int(job.temperature)]))
        frames = []
        for k in range(min(job.segment_frames, job.n_frames - seg * job.segment_frames)):
            dyn.run(job.stride)
            frames.append(_labelled(atoms, system=job.name, temperature=job.temperature, seed=job.seed,
                                    step=(seg * job.segment_frames + k + 1) * job.stride))
        yield seg, frames


def _qm9_frames(job: Job, molecule: dict) -> list:
    """MD from the QM9 geometry (two thirds of the frames), then randomly displaced copies of those frames."""
    from ase.md.velocitydistribution import Stationary, ZeroRotation, thermalize_momenta

    rng = np.random.default_rng([job.seed, molecule["index"], int(job.temperature)])
    atoms = _qm9_atoms(molecule)
    atoms.calc = _calculator(job.kind)
    thermalize_momenta(atoms, temperature_K=job.temperature, rng=rng)
    Stationary(atoms)
    ZeroRotation(atoms)
    dyn = _langevin(atoms, job, rng)
    dyn.run(WARMUP_STEPS)
    info = {"system": f"qm9_{molecule['index']}", "smiles": molecule["smiles"], "seed": job.seed}
    md = []
    for k in range(job.segment_frames - job.segment_frames // 3):
        dyn.run(job.stride)
        md.append(_labelled(atoms, temperature=job.temperature, step=WARMUP_STEPS + (k + 1) * job.stride, **info))
    displaced = []
    for k in range(job.segment_frames // 3):
        atoms.positions = md[k % len(md)].positions + rng.normal(0, rng.uniform(0.02, 0.05), (len(atoms), 3))
        displaced.append(_labelled(atoms, temperature=0.0, step=-1, **info))
    return md + displaced


def _pair_frames(job: Job, block: list[dict], seg: int) -> list:
    rng = np.random.default_rng([job.seed, int(job.name[1:]), seg])
    i, j = rng.choice(len(block), size=2, replace=len(block) < 2)
    a, b = _qm9_atoms(block[i]), _qm9_atoms(block[j])
    frames = []
    for contact in PAIR_CONTACTS:
        pair = _pair(a, b, contact + rng.uniform(-0.2, 0.2), rng)
        pair.positions += rng.normal(0, 0.03, pair.positions.shape)
        pair.calc = _calculator(job.kind)
        frames.append(_labelled(pair, system=f"pair_{block[i]['index']}_{block[j]['index']}", seed=job.seed))
    return frames


def _bulk_frames(job: Job, seg: int) -> list:
    """Cubic fcc cells (32 atoms) strained by up to ±4% (shear included) and rattled, labelled by EMT."""
    from ase.build import bulk

    rng = np.random.default_rng([job.seed, seg, *job.name.encode()])
    frames = []
    for k in range(min(job.segment_frames, job.n_frames - seg * job.segment_frames)):
        atoms = bulk(job.name, "fcc", cubic=True).repeat((2, 2, 2))
        strain = rng.uniform(-0.04, 0.04, (3, 3))
        atoms.set_cell(atoms.cell.array @ (np.eye(3) + 0.5 * (strain + strain.T)), scale_atoms=True)
        atoms.positions += rng.normal(0, rng.uniform(0.02, 0.1), (len(atoms), 3))
        atoms.calc = _calculator(job.kind)
        frames.append(_labelled(atoms, system=f"bulk_{job.name}", seed=job.seed))
    return frames


def _block_segments(job: Job, out: str, first_seg: int):
    """Yield (segment, frames) of a block from segment ``first_seg`` on: one molecule, one pair or bulk cells each."""
    if job.kind == "bulk":
        for seg in range(first_seg, job.n_segments):
            yield seg, _bulk_frames(job, seg)
        return
    first = int(job.name[1:])
    block = _selection(out)[first: first + job.n_segments]
    for seg in range(first_seg, job.n_segments):
        yield seg, _qm9_frames(job, block[seg]) if job.kind == "qm9" else _pair_frames(job, block, seg)


def run_job(job: Job, out: str, progress=None) -> int:
    """Run (or resume) one trajectory or block; returns the number of frames written by this call."""
    import ase.io

    os.environ["OMP_NUM_THREADS"] = "1"
    folder = Path(out) / job.folder
    done = _segments_done(Path(out), job)
    if len(done) >= job.n_segments:
        return 0
    segments = _md_segments if job.kind in ("xtb", "emt", "g2") else _block_segments
    written = 0
    for seg, frames in segments(job, str(out), len(done)):
        with atomic_path(folder / f"seg_{seg:05d}.extxyz") as tmp:
            ase.io.write(str(tmp), frames, format="extxyz")
        written += len(frames)
        if progress is not None:
            progress.put(len(frames))
    return written


def _worker(args) -> tuple[str, int, str | None]:
    job, out, queue = args
    try:
        return job.folder, run_job(job, out, queue), None
    except StorageError:  # a full disk or a read-only folder fails every job alike: stop the run, with one error
        raise
    except Exception as err:  # report and carry on with the other trajectories
        return job.folder, 0, f"{type(err).__name__}: {err}"


def make_data(out: str | os.PathLike, jobs: list[Job], workers: int = 1) -> dict:
    """Run every job (skipping finished segments) with a process pool; a tqdm bar counts frames."""
    import multiprocessing as mp
    import threading

    from tqdm import tqdm

    out = Path(out)
    labels = {**dict.fromkeys(XTB_KINDS, "GFN2-xTB (tblite)"), "emt": "ASE EMT", "bulk": "ASE EMT"}
    manifest = {"jobs": [asdict(j) for j in jobs], "labels": labels}
    write_text_atomic(out / "manifest.json", json.dumps(manifest, indent=1))

    total = sum(j.n_frames for j in jobs)
    already = _frames_done(out, jobs)
    todo = [j for j in jobs if len(_segments_done(out, j)) < j.n_segments]
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, tqdm(total=total, initial=already, unit="frame", desc="make-data") as bar:
        queue = manager.Queue()

        def follow():
            while (n := queue.get()) is not None:
                bar.update(n)

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        try:
            if workers <= 1:
                results = [_worker((j, str(out), queue)) for j in todo]
            else:
                with ctx.Pool(workers) as pool:
                    results = list(pool.imap_unordered(_worker, [(j, str(out), queue) for j in todo]))
        finally:  # also when a job stops the run: the reader must not outlive the manager it reads from
            queue.put(None)
            reader.join()
    errors = {folder: err for folder, _, err in results if err}
    return {"frames": _frames_done(out, jobs), "total": total, "errors": errors}
