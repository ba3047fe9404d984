"""Atomistic data for EScAIP: ASE databases / extxyz files in, batches balanced by atom count out."""

from __future__ import annotations

import fnmatch
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from zoo._lightning import L
from zoo.errors import InputError
from zoo.lightning_compat import MidEpochResume
from zoo.training import EpochSampler, ResumableBatchSampler

__all__ = ["atoms_to_sample", "collate_atoms", "atoms_to_batch", "read_structures", "AtomsDataset", "pack_by_atoms",
           "AtomCountBatchSampler", "EScAIPDataModule", "fit_target_scaling"]

Sample = dict[str, Any]


# ----------------------------------------------------------------------------- structures <-> samples
def atoms_to_sample(atoms, *, require_labels: bool = True) -> Sample:
    """An ``ase.Atoms`` with energy/forces (and optionally stress) -> plain numpy sample."""
    from ase.stress import voigt_6_to_full_3x3_stress

    calc_results = getattr(atoms.calc, "results", {}) if atoms.calc is not None else {}
    energy = calc_results.get("energy", atoms.info.get("energy"))
    forces = calc_results.get("forces", atoms.arrays.get("forces"))
    stress = calc_results.get("stress", atoms.info.get("stress"))
    if require_labels and (energy is None or forces is None):
        raise ValueError(f"structure {atoms.get_chemical_formula()} has no energy/forces labels; write them with "
                         "ase.io.write (extxyz keeps a SinglePointCalculator's results) or put them in "
                         "atoms.info['energy'] and atoms.arrays['forces']")
    if stress is not None:
        stress = np.asarray(stress, dtype=np.float64)
        stress = voigt_6_to_full_3x3_stress(stress) if stress.shape == (6,) else stress.reshape(3, 3)
    return {"atomic_numbers": np.asarray(atoms.numbers, dtype=np.int64),
            "pos": np.asarray(atoms.positions, dtype=np.float64),
            "cell": np.asarray(atoms.cell.array, dtype=np.float64), "pbc": np.asarray(atoms.pbc, dtype=bool),
            "energy": float(energy) if energy is not None else 0.0,
            "forces": np.asarray(forces, dtype=np.float64) if forces is not None else np.zeros((len(atoms), 3)),
            "stress": stress if stress is not None else np.zeros((3, 3)), "has_stress": stress is not None}


def collate_atoms(samples: Sequence[Sample]) -> dict[str, torch.Tensor]:
    """Concatenate atoms of several systems: pos (N, 3), cell (G, 3, 3), natoms (G,), ..."""
    cat = lambda key: torch.from_numpy(np.concatenate([s[key] for s in samples]))  # noqa: E731
    stack = lambda key: torch.from_numpy(np.stack([np.asarray(s[key]) for s in samples]))  # noqa: E731
    return {"atomic_numbers": cat("atomic_numbers"), "pos": cat("pos"), "forces": cat("forces"), "cell": stack("cell"),
            "pbc": stack("pbc"), "stress": stack("stress"),
            "energy": torch.tensor([s["energy"] for s in samples], dtype=torch.float64),
            "has_stress": torch.tensor([s["has_stress"] for s in samples], dtype=torch.bool),
            "natoms": torch.tensor([len(s["atomic_numbers"]) for s in samples], dtype=torch.long)}


def atoms_to_batch(atoms_list, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Unlabelled ``ase.Atoms`` -> an inference batch."""
    batch = collate_atoms([atoms_to_sample(a, require_labels=False) for a in atoms_list])
    return {k: v.to(device) for k, v in batch.items()}


def _read_samples(path: Path) -> Iterator[Sample]:
    """The labelled frames of one file; a frame that cannot be read or has no labels is an InputError naming the
    file and the frame (ase's own error says neither: "Frame has 2 atoms, expected 21")."""
    import ase.io

    frames = ase.io.iread(str(path), index=":")
    for frame in itertools.count():
        try:
            atoms = next(frames, None)
        except Exception as err:  # noqa: BLE001  (ase's readers raise many kinds for a damaged file)
            raise InputError(f"{path}: frame {frame} (counting from 0) cannot be read ({err}): the file is truncated "
                             "or malformed; write it again") from None
        if atoms is None:
            return
        try:
            yield atoms_to_sample(atoms)
        except ValueError as err:
            raise InputError(f"{path}: frame {frame} (counting from 0): {err}") from None


def read_structures(paths: str | os.PathLike | Sequence[str | os.PathLike],
                    exclude: Sequence[str] = ()) -> list[Sample]:
    """Read every frame of extxyz files and ASE databases (anything ``ase.io.read`` knows).

    A folder stands for every ``*.extxyz`` below it (e.g. the output of ``zoo escaip make-data``), sorted.
    ``exclude`` holds ``fnmatch`` patterns on file paths (``"*/T500_s1/*"``) to hold whole trajectories out.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for path in map(Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: make data with `zoo escaip make-data` (see "
                                    "`zoo escaip make-data --help`), or give your own extxyz files")
        if path.is_dir():  # skip hidden files: make-data's in-progress segments are dot-prefixed temporaries
            files.extend(sorted(p for p in path.rglob("*.extxyz") if not p.name.startswith(".")))
        else:
            files.append(path)
    files = [f for f in files if not any(fnmatch.fnmatch(f.as_posix(), pattern) for pattern in exclude)]
    samples = [sample for path in files for sample in _read_samples(path)]
    if not samples:
        raise ValueError(f"no structures in {list(map(str, paths))}" + (f" after excluding {list(exclude)}" if exclude else ""))
    return samples


class AtomsDataset(Dataset):
    def __init__(self, samples: list[Sample]):
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> Sample:
        return self.samples[i]


# ----------------------------------------------------------------------------- batching
def pack_by_atoms(order: Iterable[int], atom_counts: Sequence[int], max_atoms: int) -> list[list[int]]:
    """The structures of ``order`` in consecutive batches, each filled until the next structure would not fit
    in ``max_atoms`` (a larger structure gets a batch of its own)."""
    batches, current, size = [], [], 0
    for i in order:
        if current and size + atom_counts[i] > max_atoms:
            batches.append(current)
            current, size = [], 0
        current.append(i)
        size += atom_counts[i]
    if current:
        batches.append(current)
    return batches


class AtomCountBatchSampler(ResumableBatchSampler):
    """Batches of at most ``max_atoms`` atoms (:func:`pack_by_atoms`) in a seeded order per epoch; DDP dealing and
    resuming mid-epoch as :class:`~zoo.training.ResumableBatchSampler`.

    Every epoch packs a new order into as many batches as epoch 0 did: Lightning reads ``len()`` once and
    validates when an epoch's batch count reaches it, so an epoch one batch short would skip its validation.
    """

    def __init__(self, sampler, atom_counts: Sequence[int], max_atoms: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, resume_at: tuple[int, int] | None = None):
        if max_atoms < 1:
            raise ValueError(f"max_atoms must be positive, got {max_atoms}")
        super().__init__(sampler, len(atom_counts), drop_last=drop_last, shuffle=shuffle, seed=seed,
                         resume_at=resume_at)
        self.atom_counts, self.max_atoms = list(atom_counts), max_atoms
        self._count = len(self._pack(0))  # batches in every epoch, before DDP's dealing

    @property
    def num_batches(self) -> int:
        return self._count

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return self._to_count(self._pack(epoch))

    def _pack(self, epoch: int) -> list[list[int]]:
        return pack_by_atoms(self.order(epoch), self.atom_counts, self.max_atoms)

    def _atoms(self, batch: list[int]) -> int:
        return sum(self.atom_counts[i] for i in batch)

    def _to_count(self, batches: list[list[int]]) -> list[list[int]]:
        """Split the fullest batches in two, or spread a batch's structures over the others' room, until there
        are ``self._count``. (Packing an order gives a few batches more or fewer than epoch 0's.)"""
        while len(batches) < self._count:  # fewer batches than epoch 0 for as many structures: one holds two or more
            j = max((j for j, b in enumerate(batches) if len(b) > 1), key=lambda j: self._atoms(batches[j]))
            half = len(batches[j]) // 2
            batches[j:j + 1] = [batches[j][:half], batches[j][half:]]
        while len(batches) > self._count:
            loads = [self._atoms(b) for b in batches]
            spread = next(filter(None, (self._spread(batches, loads, j) for j in
                                        sorted(range(len(batches)), key=loads.__getitem__))), None)
            if spread is None:
                # no batch fits in the others' room (they are nearly full): the epoch keeps its extra batches,
                # and Lightning validates that many batches before the epoch ends
                return batches
            batches = spread
        return batches

    def _spread(self, batches: list[list[int]], loads: list[int], j: int) -> list[list[int]] | None:
        """The batches without batch ``j``, its structures (largest first) added where most room is left;
        None when one of them fits nowhere."""
        rest = [list(b) for b in batches[:j] + batches[j + 1:]]
        room = [self.max_atoms - load for load in loads[:j] + loads[j + 1:]]
        for i in sorted(batches[j], key=lambda i: -self.atom_counts[i]):
            k = max(range(len(rest)), key=room.__getitem__)
            if room[k] < self.atom_counts[i]:
                return None
            rest[k].append(i)
            room[k] -= self.atom_counts[i]
        return rest


# ----------------------------------------------------------------------------- normalisation
def fit_target_scaling(samples: Sequence[Sample], max_num_elements: int) -> dict[str, Any]:
    """Per-element linear energy references (least squares) and the normaliser, in float64. As fairchem's OC20/MPtrj
    setups, one rmsd (the RMS force component) scales energy, forces and stress, so gradient forces stay consistent;
    the energy mean is that of the referenced energies."""
    if not samples:
        raise ValueError("cannot fit element references on an empty training set")
    counts = np.zeros((len(samples), max_num_elements))
    for row, s in enumerate(samples):
        z = s["atomic_numbers"]
        if z.max() >= max_num_elements:
            raise ValueError(f"atomic number {int(z.max())} is beyond the model's max_num_elements={max_num_elements}")
        np.add.at(counts[row], z, 1.0)
    energies = np.array([s["energy"] for s in samples], dtype=np.float64)
    present = counts.sum(0) > 0
    refs = np.zeros(max_num_elements)
    refs[present] = np.linalg.lstsq(counts[:, present], energies, rcond=None)[0]
    residual = energies - counts @ refs
    forces = np.concatenate([s["forces"].ravel() for s in samples])
    rmsd = float(np.sqrt(np.mean(forces**2))) if np.any(forces) else 0.0
    rmsd = rmsd or float(np.std(residual / counts.sum(1))) or 1.0  # no forces: the spread of per-atom energies
    return {"element_references": refs, "energy_mean": float(residual.mean()), "energy_rmsd": rmsd, "forces_rmsd": rmsd,
            "stress_rmsd": rmsd, "supported_elements": present}


# ----------------------------------------------------------------------------- datamodule
class EScAIPDataModule(MidEpochResume, L.LightningDataModule):
    """Structures from extxyz files / ASE databases (``train``, ``val``: paths or lists of paths), batched by atom
    count. Without ``val``, a seeded ``val_fraction`` of the training structures is held out. A run resumed from a
    mid-epoch checkpoint goes on with the batches it had left."""

    def __init__(self, train: str | list[str], val: str | list[str] | None = None, val_fraction: float = 0.1,
                 exclude: list[str] | None = None, max_atoms_per_batch: int = 256, num_workers: int = 0, seed: int = 0):
        super().__init__()
        self.save_hyperparameters()
        self.train_set: AtomsDataset | None = None
        self.val_set: AtomsDataset | None = None

    def check_data(self) -> None:
        """Read the data now, before training starts (``zoo train`` calls it): a missing path, or a truncated or
        unlabelled frame, is one error naming it, and ``setup`` then reuses what was read."""
        self.setup("fit")

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        h = self.hparams
        samples = read_structures(h.train, exclude=h.exclude or ())
        if h.val is not None:
            self.train_set, self.val_set = AtomsDataset(samples), AtomsDataset(read_structures(h.val))
            return
        order = np.random.default_rng(h.seed).permutation(len(samples))
        n_val = int(round(h.val_fraction * len(samples)))
        if h.val_fraction > 0 and n_val == 0 and len(samples) > 1:
            n_val = 1
        self.val_set = AtomsDataset([samples[i] for i in order[:n_val]])
        self.train_set = AtomsDataset([samples[i] for i in order[n_val:]])
        if not len(self.train_set):
            raise ValueError("no training structures left after the validation split; lower val_fraction")

    def target_scaling(self, max_num_elements: int) -> dict[str, Any]:
        """The element references and normaliser fitted on the training structures (:func:`fit_target_scaling`):
        ``EScAIPModule.setup`` asks its datamodule for them when it trains with ``fit_references``."""
        return fit_target_scaling(self.train_set.samples, max_num_elements)

    def _loader(self, dataset: AtomsDataset, shuffle: bool) -> DataLoader:
        atom_counts = [len(s["atomic_numbers"]) for s in dataset.samples]
        sampler = AtomCountBatchSampler(EpochSampler(dataset), atom_counts, self.hparams.max_atoms_per_batch,
                                        shuffle=shuffle, seed=self.hparams.seed,
                                        resume_at=self.take_resume_at() if shuffle else None)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_atoms,
                          num_workers=self.hparams.num_workers, persistent_workers=self.hparams.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader | list:
        return self._loader(self.val_set, shuffle=False) if self.val_set is not None and len(self.val_set) else []
