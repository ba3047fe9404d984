"""File helpers shared by the hub layer: hashing, atomic writes, sharded safetensors."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
DEFAULT_SHARD_BYTES = 2 * 1024**3  # HF's default: shard above 2 GB per file


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def save_state_dict(
    state_dict: dict, directory: str | os.PathLike, *, max_shard_bytes: int = DEFAULT_SHARD_BYTES
) -> list[str]:
    """Write ``model.safetensors``, or shards plus an HF-style index above ``max_shard_bytes``.

    Returns the file names written. Tensors that share storage are cloned (safetensors refuses aliases).
    The header carries only ``{"format": "pt"}``: safetensors orders metadata keys arbitrarily, and pinned
    files must be byte-reproducible.
    """
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors, seen = {}, set()
    for key, t in state_dict.items():
        t = t.detach()
        ptr = (t.untyped_storage().data_ptr(), t.storage_offset()) if t.numel() else None
        tensors[key] = t.clone().contiguous() if ptr in seen or not t.is_contiguous() else t
        if ptr is not None:
            seen.add(ptr)
    meta = {"format": "pt"}

    shards: list[dict] = [{}]
    size = 0
    for key, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][key] = t
        size += nbytes
    for stale in list(directory.glob("model-*-of-*.safetensors")) + [directory / WEIGHTS_INDEX_NAME]:
        stale.unlink(missing_ok=True)
    if len(shards) == 1:
        with atomic_path(directory / WEIGHTS_NAME) as tmp:
            save_file(shards[0], str(tmp), metadata=meta)
        return [WEIGHTS_NAME]
    (directory / WEIGHTS_NAME).unlink(missing_ok=True)
    names, weight_map, total = [], {}, 0
    for i, shard in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        with atomic_path(directory / name) as tmp:
            save_file(shard, str(tmp), metadata=meta)
        names.append(name)
        for key, t in shard.items():
            weight_map[key] = name
            total += t.numel() * t.element_size()
    write_json_atomic(directory / WEIGHTS_INDEX_NAME, {"metadata": {"total_size": total}, "weight_map": weight_map})
    return [*names, WEIGHTS_INDEX_NAME]


def weight_files(directory: str | os.PathLike) -> list[Path]:
    """The safetensors files of a repo folder, single or sharded."""
    directory = Path(directory)
    index = directory / WEIGHTS_INDEX_NAME
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return [directory / n for n in sorted(set(weight_map.values()))]
    single = directory / WEIGHTS_NAME
    if single.exists():
        return [single]
    raise FileNotFoundError(f"{directory} holds neither {WEIGHTS_NAME} nor {WEIGHTS_INDEX_NAME}")


def load_state_dict(directory: str | os.PathLike, device: str = "cpu") -> dict:
    from safetensors.torch import load_file

    state: dict = {}
    for path in weight_files(directory):
        state.update(load_file(str(path), device=device))
    return state
