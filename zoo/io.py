"""File helpers shared by the zoo and its methods: hashing, atomic writes, sharded safetensors, JSON, and the one
place where the machine's refusals to write (a full disk, a read-only folder) become zoo errors."""

from __future__ import annotations

import contextvars
import ctypes
import errno
import hashlib
import json
import math
import mmap
import os
import secrets
import shutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from zoo.errors import DamagedFileError, DiskFullError, ReadOnlyError, StorageError
from zoo.settings import setting_for

WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
CONFIG_FORMAT = 1  # of the config.json this zoo writes (it reads this and older)
DEFAULT_SHARD_BYTES = 2 * 1024**3  # HF's default: shard above 2 GB per file
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
SMALL_FILES_ROOM = 1 << 20  # a repo's safetensors headers, config.json and card, beside its tensor bytes


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


# ----------------------------------------------------------------------------- machine faults
def _fix(path: str | os.PathLike | None, *, read_only: bool) -> str:
    """How to get past a refused write at ``path``: move the setting whose folder holds it, or write elsewhere."""
    setting = setting_for(path) if path is not None else None
    if not read_only:
        return f"set {setting} to a folder on a disk with room" if setting else "write to a disk with room"
    if setting == "ZOO_HF_CACHE":
        return ("set ZOO_HF_CACHE to a writable folder, or, if this cache already holds the model, run with "
                "HF_HUB_OFFLINE=1")
    return f"set {setting} to a writable folder" if setting else "write to a writable folder"


def storage_error(err: OSError, path: str | os.PathLike | None = None) -> StorageError | None:
    """The zoo's error for the machine refusing a write at ``path`` (default: the file ``err`` names): a full disk,
    or a read-only or unwritable folder. None for any other ``OSError``."""
    if isinstance(err, StorageError):
        return err
    path = path if path is not None else err.filename
    where = f"{path}: " if path is not None else ""
    if err.errno in DISK_FULL:
        return DiskFullError(f"{where}the disk is full ({err.strerror}): free space there, or "
                             f"{_fix(path, read_only=False)}", path, err.errno)
    if err.errno in NOT_WRITABLE:
        return ReadOnlyError(f"{where}cannot write there ({err.strerror}): {_fix(path, read_only=True)}",
                             path, err.errno)
    return None


@contextmanager
def storage_errors(path: str | os.PathLike | None = None) -> Iterator[None]:
    """Within the block, a full disk or a read-only folder is a :func:`storage_error` at the file the error names,
    else at ``path`` (a write that filled the disk names no file)."""
    try:
        yield
    except OSError as err:
        translated = storage_error(err, err.filename or path)
        if translated is None or translated is err:
            raise
        raise translated from None


def check_space(path: str | os.PathLike, need: int, what: str) -> None:
    """Raise DiskFullError, before a byte is written, when ``need`` bytes for ``what`` do not fit on the disk that
    holds (or will hold) ``path``."""
    existing = Path(path).absolute()
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if need > free:
        raise DiskFullError(f"{path}: {what} needs {human_bytes(need)}, but its disk has {human_bytes(free)} free; "
                            f"nothing was written. Free {human_bytes(need - free)} or more there, or "
                            f"{_fix(path, read_only=False)}", path, errno.ENOSPC)


def _missing_folders(folder: Path) -> list[Path]:
    """The folders up to ``folder`` that do not exist yet, outermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


@contextmanager
def folder_undone_on_failure(folder: str | os.PathLike) -> Iterator[Path]:
    """Create ``folder`` (and its parents) for the block to write in; if the block fails or is interrupted, remove the
    folders it created, with whatever the block wrote there: a failed write leaves no empty or partial folder. A full
    disk or a read-only folder is a :func:`storage_error` (naming ``folder`` unless a write within named its file)."""
    folder = Path(folder)
    missing = _missing_folders(folder)
    try:
        with storage_errors(folder):
            folder.mkdir(parents=True, exist_ok=True)
            yield folder
    except BaseException:
        if missing:
            shutil.rmtree(missing[0], ignore_errors=True)
        raise


def hash_file(path: str | os.PathLike, h: Any, chunk: int = 1 << 22) -> str:
    """The hex digest of ``h`` (a hashlib object, possibly primed with a header) updated with the file's bytes."""
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    return hash_file(path, hashlib.sha256())


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place only if the block succeeds, else leave nothing
    (neither the temporary file nor a folder made for it). A full disk or a read-only folder is a
    :func:`storage_error` naming ``path``."""
    path = Path(path)
    missing = _missing_folders(path.parent)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        with storage_errors(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            # created like any other written file (0666 less the umask), not mkstemp's 0600; O_EXCL keeps it unique
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            yield tmp
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        for folder in reversed(missing):  # only while empty: another process may be writing there too
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


# the dtypes a zoo repo stores, by their names in config files (torch's, see dtype_name): each one's safetensors code
DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64", "int32": "I32",
          "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL", "float8_e4m3fn": "F8_E4M3",
          "float8_e5m2": "F8_E5M2", "uint16": "U16", "uint32": "U32", "uint64": "U64"}


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``: a dtype as config files and messages name it (``zoo.module.parse_dtype``
    reads it back)."""
    return str(dtype).removeprefix("torch.")


def weights_fingerprint(module: Any) -> str:
    """sha256 over a module's state dict: sorted names, dtypes, shapes and raw bytes, a tensor tied to an earlier one
    counted once. Stored in shipped repos (a delta's ``base_sha256``), so the recipe must not change."""
    import torch

    digest = hashlib.sha256()
    state = module.state_dict()
    seen: set[tuple] = set()
    for key in sorted(state):
        t = state[key].detach()
        ident = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        if t.numel() and ident in seen:
            continue
        seen.add(ident)
        digest.update(f"{key}|{dtype_name(t.dtype)}|{list(t.shape)}\n".encode())
        digest.update(t.contiguous().cpu().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


@dataclass(frozen=True)
class LazyTensor:
    """A tensor read only when it is written: ``load()`` returns it (``dtype``, ``shape`` as announced). A converter
    passes these to :func:`save_state_dict` to stream a checkpoint larger than memory one tensor at a time."""

    dtype: Any  # torch.dtype
    shape: tuple[int, ...]
    load: Callable[[], Any]

    @property
    def nbytes(self) -> int:  # as torch.Tensor.nbytes: save_state_dict sizes both alike
        return math.prod(int(d) for d in self.shape) * self.dtype.itemsize


_RELEASE_PAGES = contextvars.ContextVar("zoo_release_pages", default=False)
_MADV_PAGEOUT = 21  # Linux >= 5.4: reclaim the range; clean file-backed pages are dropped, nothing is lost


def release_pages(t) -> None:
    """Hint the kernel to drop the resident pages behind tensor ``t`` (Linux ``madvise(MADV_PAGEOUT)``; a no-op
    elsewhere). Pages of a ``torch.load(mmap=True)`` tensor are read from the file again if touched; anonymous memory
    stays. So a converter reading a checkpoint through ``mmap`` holds about one tensor resident, not the file."""
    if not sys.platform.startswith("linux") or t.numel() == 0 or t.device.type != "cpu":
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    page = mmap.PAGESIZE
    start = t.data_ptr()
    end = start + t.numel() * t.element_size()
    lo, hi = start - start % page, end + (-end % page)
    libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), ctypes.c_int(_MADV_PAGEOUT))


@contextmanager
def releasing_pages() -> Iterator[None]:
    """Within this block :func:`write_safetensors` releases (:func:`release_pages`) every tensor it has written:
    a conversion from an mmap-ed checkpoint then peaks at about one tensor, not the checkpoint's size."""
    token = _RELEASE_PAGES.set(True)
    try:
        yield
    finally:
        _RELEASE_PAGES.reset(token)


def write_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write a safetensors file whose bytes depend only on its contents (pinned files must be byte-reproducible, and
    ``safetensors.torch.save_file`` orders metadata keys arbitrarily): an 8-byte little-endian header size, a JSON
    header with sorted keys padded to 8 bytes, then the raw tensor bytes, largest elements first so every tensor
    stays aligned. A :class:`LazyTensor` is loaded just before its bytes are written and dropped after."""
    import torch

    order = sorted(tensors, key=lambda k: (-tensors[k].dtype.itemsize, k))
    header: dict = {"__metadata__": dict(sorted((metadata or {}).items()))} if metadata else {}
    offset = 0
    for key in order:
        dtype, shape = tensors[key].dtype, tuple(tensors[key].shape)
        if dtype_name(dtype) not in DTYPES:
            raise TypeError(f"{key}: dtype {dtype} cannot be stored in safetensors")
        nbytes = tensors[key].nbytes
        header[key] = {"dtype": DTYPES[dtype_name(dtype)], "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    blob += b" " * (-len(blob) % 8)
    release = _RELEASE_PAGES.get()
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for key in order:
            value = tensors[key]
            t = value.load() if isinstance(value, LazyTensor) else value
            if isinstance(value, LazyTensor) and (t.dtype, tuple(t.shape)) != (value.dtype, tuple(value.shape)):
                raise ValueError(f"{key}: loaded {t.dtype} {tuple(t.shape)}, announced {value.dtype} {value.shape}")
            t = t.detach().to("cpu")
            c = t.contiguous()
            if c.numel():
                f.write(c.reshape(-1).view(torch.uint8).numpy().data)
            if release:
                release_pages(t)
            del t, c


def write_repo(directory: str | os.PathLike, state_dict: dict, config: dict, *,
               max_shard_bytes: int = DEFAULT_SHARD_BYTES, metadata: dict[str, str] | None = None) -> list[str]:
    """A zoo repo folder: the weights (:func:`save_state_dict`) and ``config.json``, the module's ``config`` (method,
    model_type, hparams) with this zoo's format and version; returns the file names. Should that fail or be
    interrupted (a full disk, Ctrl-C), a ``directory`` this call created is removed: never weights without a config."""
    from zoo import __version__

    with folder_undone_on_failure(directory) as directory:
        names = save_state_dict(state_dict, directory, max_shard_bytes=max_shard_bytes, metadata=metadata)
        write_json_atomic(directory / CONFIG_NAME, {"zoo_config_format": CONFIG_FORMAT, "zoo_version": __version__,
                                                    **config})
    return [CONFIG_NAME, *names]


def save_state_dict(state_dict: dict, directory: str | os.PathLike, *, max_shard_bytes: int = DEFAULT_SHARD_BYTES,
                    metadata: dict[str, str] | None = None) -> list[str]:
    """Write ``model.safetensors``, or shards plus an HF-style index above ``max_shard_bytes``; returns the names.

    Tensors that share storage are cloned (safetensors refuses aliases). A repo that cannot fit on the disk is a
    DiskFullError before a byte is written; should the write fail all the same, a ``directory`` it created is removed.
    """
    check_space(directory, sum(t.nbytes for t in state_dict.values()) + SMALL_FILES_ROOM, "the model")
    tensors, seen = {}, set()
    for key, t in state_dict.items():
        if isinstance(t, LazyTensor):
            tensors[key] = t
            continue
        t = t.detach()
        ptr = (t.untyped_storage().data_ptr(), t.storage_offset()) if t.numel() else None
        tensors[key] = t.clone().contiguous() if ptr in seen or not t.is_contiguous() else t
        if ptr is not None:
            seen.add(ptr)
    meta = {"format": "pt", **(metadata or {})}
    shards: list[dict] = [{}]
    size = 0
    for key, t in tensors.items():
        nbytes = t.nbytes
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][key] = t
        size += nbytes
    with folder_undone_on_failure(directory) as directory:
        for stale in list(directory.glob("model-*-of-*.safetensors")) + [directory / WEIGHTS_INDEX_NAME]:
            stale.unlink(missing_ok=True)
        if len(shards) == 1:
            write_safetensors(shards[0], directory / WEIGHTS_NAME, meta)
            return [WEIGHTS_NAME]
        (directory / WEIGHTS_NAME).unlink(missing_ok=True)
        names = [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)]
        for name, shard in zip(names, shards):
            write_safetensors(shard, directory / name, meta)
        index = {"metadata": {"total_size": sum(t.nbytes for t in tensors.values())},
                 "weight_map": {key: name for name, shard in zip(names, shards) for key in shard}}
        write_json_atomic(directory / WEIGHTS_INDEX_NAME, index)
        return [*names, WEIGHTS_INDEX_NAME]


def weight_files(directory: str | os.PathLike) -> list[Path]:
    """The safetensors files of a repo folder, single or sharded."""
    directory = Path(directory)
    index = directory / WEIGHTS_INDEX_NAME
    if index.exists():
        try:
            weight_map = json.loads(index.read_bytes())["weight_map"]
            names = sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise DamagedFileError(f"{index} is damaged ({type(err).__name__}: {err}): it must be JSON with a "
                                   "'weight_map' of tensor names to shard files. Get a good copy: download the model "
                                   "again, or save or publish it again") from None
        return [directory / n for n in names]
    single = directory / WEIGHTS_NAME
    if single.exists():
        return [single]
    raise FileNotFoundError(f"{directory} holds neither {WEIGHTS_NAME} nor {WEIGHTS_INDEX_NAME}")


def load_state_dict(directory: str | os.PathLike, device: str = "cpu") -> dict:
    """Every tensor of a repo folder; a truncated or corrupt weights file is a DamagedFileError naming it."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    state: dict = {}
    for path in weight_files(directory):
        try:
            state.update(load_file(str(path), device=device))
        except SafetensorError as err:
            raise DamagedFileError(f"{path} is damaged ({err}): it is not a complete safetensors file, as after an "
                                   "interrupted download or copy. Get a good copy: download the model again (zoo.load "
                                   "of a catalog name fetches and checks it; for a folder, copy or publish it again "
                                   "from its source)") from None
    return state
