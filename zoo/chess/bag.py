"""ChessBench ``.bag`` files and their records (the official on-disk format, read and written).

A bag is all record payloads back to back, then one little-endian int64 per record: the offset where the record
*ends*. The last 8 bytes are therefore the index start. ``X@N.bag`` names N shards ``X-00000-of-0000N.bag`` read in
order as one sequence. ``.bagz`` bags zstd-compress each non-empty payload (needs the optional ``zstandard`` package).

Records are Apache Beam tuple encodings: every component but the last is prefixed with its byte length as
an unsigned LEB128 varint; strings are UTF-8, floats 8-byte big-endian doubles.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import mmap
import os
import re
import struct
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from zoo.io import atomic_path

__all__ = ["BagReader", "BagWriter", "shard_paths", "encode_record", "decode_record", "POLICIES", "check_policy"]

POLICIES = ("action_value", "state_value", "behavioral_cloning")  # each trains on its own kind of record
_SHARDED = re.compile(r"^(?P<stem>.*)@(?P<n>\d+)(?P<rest>[^/]*)$")


def shard_paths(path: str | os.PathLike) -> list[Path]:
    """``X@N.bag`` -> the N shard paths; any other name -> itself."""
    text = str(path)
    match = _SHARDED.match(text)
    if not match:
        return [Path(text)]
    n = int(match["n"])
    if n <= 0:
        raise ValueError(f"{text}: a sharded name needs @N with N >= 1")
    return [Path(f"{match['stem']}-{i:05d}-of-{n:05d}{match['rest']}") for i in range(n)]


def _zstd():
    try:
        import zstandard
    except ImportError:
        raise ImportError(".bagz files need the optional 'zstandard' package: pip install zstandard") from None
    return zstandard


# ----------------------------------------------------------------------------- reading
class _BagFile:
    def __init__(self, path: Path):
        self.path = path
        self.compressed = path.suffix == ".bagz"
        self._map = None
        size = path.stat().st_size
        if size == 0:
            self.ends: list[int] = []
            return
        if size < 8:
            raise ValueError(f"{path} is {size} bytes: too short to be a .bag file (no index)")
        with open(path, "rb") as f:
            f.seek(size - 8)
            (index_start,) = struct.unpack("<q", f.read(8))
            if not 0 <= index_start <= size - 8 or (size - index_start) % 8:
                raise ValueError(f"{path} is not a .bag file: its last 8 bytes ({index_start}) are not an index start")
            f.seek(index_start)
            raw = f.read(size - index_start)
        self.ends = list(struct.unpack(f"<{len(raw) // 8}q", raw))
        if any(b < a for a, b in zip([0] + self.ends, self.ends)) or self.ends[-1] != index_start:
            raise ValueError(f"{path} has a corrupt index (record ends are not increasing up to the index)")

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, i: int) -> bytes:
        start, end = self.ends[i - 1] if i > 0 else 0, self.ends[i]
        if end == start:
            return b""
        if self._map is None:
            with open(self.path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        data = self._map[start:end]
        return _zstd().ZstdDecompressor().decompress(data) if self.compressed else data

    def __getstate__(self):
        return {**self.__dict__, "_map": None}  # reopened lazily in each worker


class BagReader(Sequence[bytes]):
    """Random access to the raw records of a bag (or of all shards of ``X@N.bag``); picklable for DataLoaders."""

    def __init__(self, path: str | os.PathLike):
        paths = shard_paths(path)
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"bag file(s) not found: {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}")
        self.files = [_BagFile(p) for p in paths]
        *self._starts, self._len = itertools.accumulate((len(f) for f in self.files), initial=0)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"record {i} out of range for a bag of {self._len} records")
        shard = bisect.bisect_right(self._starts, i) - 1
        return self.files[shard][i - self._starts[shard]]

    def __iter__(self) -> Iterator[bytes]:
        return (f[j] for f in self.files for j in range(len(f)))


# ----------------------------------------------------------------------------- writing
class BagWriter(contextlib.AbstractContextManager):
    """Write records to a bag atomically (the file appears only when the writer closes without error)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.compress = self.path.suffix == ".bagz"
        self._ctx = atomic_path(self.path)
        self._tmp = self._ctx.__enter__()
        self._out = open(self._tmp, "wb")
        self._ends: list[int] = []
        self._offset = 0
        self._compressor = _zstd().ZstdCompressor() if self.compress else None

    def write(self, record: bytes) -> None:
        if self.compress and record:
            record = self._compressor.compress(record)
        self._out.write(record)
        self._offset += len(record)
        self._ends.append(self._offset)

    def write_all(self, records: Iterable[bytes]) -> None:
        for record in records:
            self.write(record)

    def close(self, error: BaseException | None = None) -> None:
        """Write the index and move the bag into place; after ``error``, or when the index cannot be written (a full
        disk), remove the temporary bag instead (a full disk or a read-only folder is then zoo.io's error)."""
        if self._out.closed:
            return
        failed = error
        try:
            with self._out:
                if error is None and self._ends:
                    self._out.write(struct.pack(f"<{len(self._ends)}q", *self._ends))
        except BaseException as err:  # noqa: BLE001  (re-raised below, once the temporary bag is gone)
            failed = failed or err
        if failed is None:
            self._ctx.__exit__(None, None, None)
            return
        self._ctx.__exit__(type(failed), failed, failed.__traceback__)
        if failed is not error:
            raise failed

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(exc)


# ----------------------------------------------------------------------------- records
def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated record: a length varint runs past the end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")


def encode_record(kind: str, *values) -> bytes:
    """Encode (fen, move, win_prob) / (fen, win_prob) / (fen, move) as the official Beam tuple bytes."""
    check_policy(kind)
    arity = 3 if kind == "action_value" else 2
    if len(values) != arity:
        raise ValueError(f"a {kind} record has {arity} fields, got {len(values)}")
    *strings, last = values
    last = last.encode("utf-8") if kind == "behavioral_cloning" else struct.pack(">d", float(last))
    return b"".join(_varint(len(p)) + p for p in (v.encode("utf-8") for v in strings)) + last


def decode_record(kind: str, data: bytes) -> tuple:
    """Inverse of :func:`encode_record`."""
    check_policy(kind)
    strings, pos = [], 0
    for _ in range(2 if kind == "action_value" else 1):
        length, pos = _read_varint(data, pos)
        strings.append(data[pos : pos + length].decode("utf-8"))
        pos += length
    if kind == "behavioral_cloning":
        return strings[0], data[pos:].decode("utf-8")
    if len(data) - pos != 8:
        raise ValueError(f"{kind} records end in an 8-byte double, found {len(data) - pos} bytes")
    return *strings, struct.unpack(">d", data[pos:])[0]
