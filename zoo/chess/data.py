"""ChessBench data for training: ``.bag`` records -> target sequences, and a LightningDataModule.

Works on the official ChessBench download and on ``zoo chess make-data`` output (same layout:
``<root>/{train,test}/<policy>_data.bag``, sharded sets as ``<policy>@N_data.bag`` or found from their shard files).
"""

from __future__ import annotations

import re
from pathlib import Path

import chess
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from zoo._lightning import L
from zoo.chess.bag import BagReader, check_policy, decode_record
from zoo.chess.tokenizer import action_index, to_bucket, tokenize
from zoo.lightning_compat import MidEpochResume
from zoo.training import resumable_loader

__all__ = ["ChessBagDataset", "ChessDataModule", "find_bag", "mirror_record", "record_to_sequence"]


def mirror_record(policy: str, record: tuple) -> tuple:
    """The same record with colours swapped and the board flipped top to bottom (python-chess ``mirror``):
    an equally valid sample, since win probabilities are the mover's and moves are mirrored with the board."""
    fen = chess.Board(record[0]).mirror().fen()
    if policy == "state_value":
        return (fen, record[1])
    move = chess.Move.from_uci(record[1])
    mirrored = chess.Move(chess.square_mirror(move.from_square), chess.square_mirror(move.to_square), move.promotion)
    return (fen, mirrored.uci(), *record[2:])


def record_to_sequence(policy: str, record: tuple, num_return_buckets: int = 128) -> tuple[np.ndarray, float]:
    """A decoded record -> (target sequence int64 (T,), win prob or NaN), in the official layout."""
    fen_tokens = tokenize(record[0]).astype(np.int64)
    win_prob = float("nan") if policy == "behavioral_cloning" else record[-1]
    tail = [] if policy == "state_value" else [action_index(record[1])]  # the move
    if policy != "behavioral_cloning":
        tail.append(to_bucket(win_prob, num_return_buckets))
    return np.concatenate([fen_tokens, np.asarray(tail, np.int64)]), float(win_prob)


class ChessBagDataset(Dataset):
    """One bag (or ``X@N`` shards) of ``policy`` records as ``{"sequences", "win_probs"}`` samples."""

    def __init__(self, path: str | Path, policy: str, num_return_buckets: int = 128, max_records: int | None = None,
                 mirror: bool = False):
        check_policy(policy)
        self.reader = BagReader(path)
        self.policy = policy
        self.num_return_buckets = num_return_buckets
        self.mirror = mirror
        self.length = len(self.reader) if max_records is None else min(max_records, len(self.reader))
        if self.length == 0:
            raise ValueError(f"{path} holds no records: make the data with more games (`zoo chess make-data "
                             "--games N`; each game goes to the test split with chance --test-fraction)")

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        record = decode_record(self.policy, self.reader[i])
        if self.mirror and torch.rand(()) < 0.5:
            record = mirror_record(self.policy, record)
        sequence, win_prob = record_to_sequence(self.policy, record, self.num_return_buckets)
        return {"sequences": torch.from_numpy(sequence), "win_probs": torch.tensor(win_prob, dtype=torch.float32)}


def find_bag(root: str | Path, split: str, policy: str) -> str:
    """``root/split/<policy>_data.bag``, or its ``@N`` sharded form when only shards exist."""
    folder = Path(root) / split
    single = folder / f"{policy}_data.bag"
    if single.exists():
        return str(single)
    shards = sorted(folder.glob(f"{policy}-*-of-*_data.bag"))
    if shards:
        n = int(re.search(r"-of-(\d+)_data\.bag$", shards[0].name)[1])
        return str(folder / f"{policy}@{n}_data.bag")
    raise FileNotFoundError(f"no {policy} data under {folder} (expected {single.name} or its shards); run `zoo chess make-data`")


class ChessDataModule(MidEpochResume, L.LightningDataModule):
    """Train/validation loaders over ``data_dir`` (a ChessBench/make-data root with ``train/`` and ``test/``) or
    explicit ``train_path`` / ``val_path`` (a ``.bag`` file or ``X@N.bag`` shards). ``mirror_augment`` mirrors each
    training sample with probability 1/2 (``mirror_record``; not in the official trainer): twice the positions for a
    small dataset. Training records come in a new order each epoch, drawn from ``seed``; a run resumed mid-epoch goes
    on with the batches it had left."""

    def __init__(self, data_dir: str | None = None, policy: str = "action_value", train_path: str | None = None,
                 val_path: str | None = None, batch_size: int = 256, num_workers: int = 0, num_return_buckets: int = 128,
                 max_train_records: int | None = None, max_val_records: int | None = None, mirror_augment: bool = False,
                 seed: int = 0):
        super().__init__()
        if data_dir is None and train_path is None:
            raise ValueError("ChessDataModule needs data_dir (with train/ and test/) or train_path")
        self.save_hyperparameters()
        self.train_set: ChessBagDataset | None = None
        self.val_set: ChessBagDataset | None = None

    def _path(self, explicit: str | None, split: str) -> str | None:
        if explicit is not None:
            return explicit
        if self.hparams.data_dir is None:
            return None
        try:
            return find_bag(self.hparams.data_dir, split, self.hparams.policy)
        except FileNotFoundError:
            if split == "train":
                raise
            return None

    def check_data(self) -> None:
        """Raise the error ``setup`` would for missing data, before training starts (``zoo train`` calls it)."""
        h = self.hparams
        for path in (self._path(h.train_path, "train"), h.val_path):
            if path is not None and not (Path(path).exists() or "@" in Path(path).name):
                raise FileNotFoundError(f"chess data {path} does not exist: make it with `zoo chess make-data` (the "
                                        "small models' data: recipes/chess/make_data_small.sh, see README)")

    def setup(self, stage: str | None = None) -> None:
        h = self.hparams
        if self.train_set is None:
            self.train_set = ChessBagDataset(self._path(h.train_path, "train"), h.policy, h.num_return_buckets,
                                             h.max_train_records, mirror=h.mirror_augment)
        val = self._path(h.val_path, "test")
        if self.val_set is None and val is not None:
            self.val_set = ChessBagDataset(val, h.policy, h.num_return_buckets, h.max_val_records)

    def train_dataloader(self) -> DataLoader:
        h = self.hparams
        return resumable_loader(self.train_set, h.batch_size, shuffle=True, seed=h.seed,
                                drop_last=len(self.train_set) >= h.batch_size, resume_at=self.take_resume_at(),
                                num_workers=h.num_workers, persistent_workers=h.num_workers > 0)

    def val_dataloader(self):
        if self.val_set is None:
            return []
        h = self.hparams
        return DataLoader(self.val_set, batch_size=h.batch_size, num_workers=h.num_workers, persistent_workers=h.num_workers > 0)
