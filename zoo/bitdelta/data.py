"""Text data for distillation, fine-tuning and evaluation: token windows from a text file or token tensors.

``TextDataModule(train="corpus.txt", tokenizer="bytes")`` cuts the tokenized text into non-overlapping
windows of ``max_length`` tokens, in file order (the official distillation uses the first N documents in stream
order). A ``.safetensors`` file with an ``input_ids`` tensor (…, L) is used as is, row by row.
Batches are dicts ``{"input_ids": (B, L), "attention_mask": (B, L)}``, the keyword inputs of HF causal LMs.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from zoo._lightning import L
from zoo.lightning_compat import MidEpochResume
from zoo.training import resumable_loader

__all__ = ["ByteTokenizer", "get_tokenizer", "load_tokens", "load_token_rows", "TokenRows", "TokenWindows", "TextDataModule"]


class ByteTokenizer:
    """UTF-8 bytes as token ids 0..255 (for byte-level models such as the fixtures' 256-token Llama), called and
    decoding as a ``transformers`` tokenizer does (there are no special tokens to add or skip)."""

    vocab_size = 256
    pad_token_id = 0

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def __call__(self, text: str, **kwargs) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text)}

    def decode(self, ids, **kwargs) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


def get_tokenizer(spec: str | os.PathLike, revision: str | None = None):
    """``"bytes"`` or anything ``transformers.AutoTokenizer.from_pretrained`` accepts (folder or repo id)."""
    if str(spec) == "bytes":
        return ByteTokenizer()
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(spec), revision=revision)
    except (OSError, ValueError) as err:
        raise ValueError(f"no tokenizer at {spec!r} ({err}); pass tokenizer='bytes' or a folder/repo with one") from None


def load_tokens(path: str | os.PathLike, tokenizer="bytes") -> torch.Tensor:
    """All tokens of a text file, 1-d int64."""
    tokenizer = get_tokenizer(tokenizer) if isinstance(tokenizer, (str, os.PathLike)) else tokenizer
    text = Path(path).read_text(encoding="utf-8")
    return torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)


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
    ids = load_tokens(path, tokenizer)
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


class TokenWindows(TokenRows):
    """Every window of ``length`` tokens starting at a multiple of ``stride`` (stride 1: every offset)."""

    def __init__(self, tokens: torch.Tensor, length: int, stride: int):
        if tokens.numel() <= length:
            raise ValueError(f"the text has {tokens.numel()} tokens, fewer than one window of {length}")
        super().__init__(tokens.unfold(0, length, stride))  # (N, length) views of the text, no copy


class TextDataModule(MidEpochResume, L.LightningDataModule):
    """Token windows for training (``stride`` < ``max_length`` with ``shuffle``: random overlapping windows of a
    text file, for pretraining) and non-overlapping windows for validation. With ``shuffle`` each epoch has its own
    order, drawn from ``seed``; a run resumed from a mid-epoch checkpoint goes on with the batches it had left."""

    def __init__(self, train: str, val: str | None = None, tokenizer: str = "bytes", max_length: int = 128,
                 batch_size: int = 4, num_samples: int | None = None, shuffle: bool = False, seed: int = 0,
                 num_workers: int = 0, stride: int | None = None):
        super().__init__()
        self.save_hyperparameters()
        self.rows: dict[str, torch.Tensor] = {}

    def setup(self, stage: str | None = None) -> None:
        hp = self.hparams
        text_windows = hp.stride is not None and not hp.train.endswith(".safetensors")  # cut by train_dataloader
        if not text_windows and "train" not in self.rows:
            self.rows["train"] = load_token_rows(hp.train, hp.tokenizer, hp.max_length)[: hp.num_samples or None]
        if hp.val and "val" not in self.rows:
            self.rows["val"] = load_token_rows(hp.val, hp.tokenizer, hp.max_length)

    def train_dataloader(self) -> DataLoader:
        hp = self.hparams
        if hp.stride is not None and not hp.train.endswith(".safetensors"):
            dataset = TokenWindows(load_tokens(hp.train, hp.tokenizer), hp.max_length, hp.stride)
        else:
            dataset = TokenRows(self.rows["train"])
        return resumable_loader(dataset, hp.batch_size, shuffle=hp.shuffle, seed=hp.seed,
                                resume_at=self.take_resume_at(), num_workers=hp.num_workers)

    def val_dataloader(self) -> DataLoader | list:
        if "val" not in self.rows:
            return []  # no validation
        return DataLoader(TokenRows(self.rows["val"]), batch_size=self.hparams.batch_size,
                          num_workers=self.hparams.num_workers)
