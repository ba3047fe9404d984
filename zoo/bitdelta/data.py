"""Text data for distillation, fine-tuning and evaluation: token windows from a text file or token tensors.

``TextDataModule(train="corpus.txt", tokenizer="bytes")`` cuts the tokenized text into non-overlapping
windows of ``max_length`` tokens, in file order (the official distillation uses the first N documents in stream
order). A ``.safetensors`` file with an ``input_ids`` tensor (…, L) is used as is, row by row.
Batches are dicts ``{"input_ids": (B, L), "attention_mask": (B, L)}``, the keyword inputs of HF causal LMs.
"""

from __future__ import annotations

import os
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

__all__ = ["ByteTokenizer", "get_tokenizer", "load_token_rows", "TokenRows", "TextDataModule"]


class ByteTokenizer:
    """UTF-8 bytes as token ids 0..255 (for byte-level models such as the fixtures' 256-token Llama)."""

    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


def get_tokenizer(spec: str | os.PathLike):
    """``"bytes"`` or anything ``transformers.AutoTokenizer.from_pretrained`` accepts (folder or repo id)."""
    if str(spec) == "bytes":
        return ByteTokenizer()
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(spec))
    except (OSError, ValueError) as err:
        raise ValueError(f"no tokenizer at {spec!r} ({err}); pass tokenizer='bytes' or a folder/repo with one") from None


def _encode(tokenizer, text: str) -> list[int]:
    if isinstance(tokenizer, ByteTokenizer):
        return tokenizer.encode(text)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def load_token_rows(path: str | os.PathLike, tokenizer="bytes", max_length: int = 128) -> torch.Tensor:
    """(N, max_length) int64 rows: a ``.safetensors`` ``input_ids`` tensor, or a text file cut into windows."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"data file {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        ids = load_file(str(path)).get("input_ids")
        if ids is None:
            raise ValueError(f"{path} has no 'input_ids' tensor")
        return ids.reshape(-1, ids.shape[-1]).long()
    tokenizer = get_tokenizer(tokenizer) if isinstance(tokenizer, (str, os.PathLike)) else tokenizer
    ids = torch.tensor(_encode(tokenizer, path.read_text(encoding="utf-8")), dtype=torch.long)
    if ids.numel() < 2:
        raise ValueError(f"{path} holds fewer than 2 tokens")
    if ids.numel() < max_length:
        return ids[None]
    n = ids.numel() // max_length
    return ids[: n * max_length].view(n, max_length)


class TokenRows(Dataset):
    def __init__(self, rows: torch.Tensor):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows[i], "attention_mask": torch.ones_like(self.rows[i])}


class TextDataModule(L.LightningDataModule):
    def __init__(
        self,
        train: str,
        val: str | None = None,
        tokenizer: str = "bytes",
        max_length: int = 128,
        batch_size: int = 4,
        num_samples: int | None = None,
        shuffle: bool = False,
        seed: int = 0,
        num_workers: int = 0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.rows: dict[str, torch.Tensor] = {}

    def setup(self, stage: str | None = None) -> None:
        hp = self.hparams
        for split, path in (("train", hp.train), ("val", hp.val)):
            if path and split not in self.rows:
                rows = load_token_rows(path, hp.tokenizer, hp.max_length)
                self.rows[split] = rows[: hp.num_samples] if split == "train" and hp.num_samples else rows

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        generator = torch.Generator().manual_seed(self.hparams.seed)
        return DataLoader(TokenRows(self.rows[split]), batch_size=self.hparams.batch_size, shuffle=shuffle,
                          generator=generator, num_workers=self.hparams.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", self.hparams.shuffle)

    def val_dataloader(self) -> DataLoader | list:
        return self._loader("val", False) if "val" in self.rows else []  # [] = no validation
