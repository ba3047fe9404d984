"""What every method's converter (``zoo/<method>/convert.py``) needs: official pickles read safely, their keys
renamed strictly, and the one file of an upstream download."""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch

from zoo.errors import ConfigError, DamagedFileError, InputError

__all__ = ["safe_torch_load", "map_keys", "single_file", "preview"]

T = TypeVar("T")
Allowed = Any  # a class or function, or (stand-in class, "module.Name" of the class the pickle names)

_ZIP_MAGIC = b"PK\x03\x04"
# torch's weights-only unpickler names the first global it refuses (legacy, non-zip files are not scanned first)
_REFUSED = re.compile(r"Unsupported global: GLOBAL (\S+) was not an allowed global")


def _refuse(path: Path, names: list[str], allow: list[Allowed], what: str) -> InputError:
    extra = "".join(f", {a[1]}" if isinstance(a, tuple) else f", {a.__module__}.{a.__qualname__}" for a in allow)
    return InputError(f"{path} names {', '.join(sorted(names))}, which {what} never holds, so it is not unpickled "
                      f"(only tensors, plain containers{extra} are allowed): use the official file, or re-save it as a "
                      "plain state dict (torch.save(model.state_dict(), path))")


def safe_torch_load(path: str | os.PathLike, allow: Iterable[Allowed] = (), *, what: str = "a checkpoint") -> Any:
    """``torch.load(path, weights_only=True)`` with ``allow`` allow-listed: classes, functions, or ``(stand-in,
    "module.Name")`` pairs that read a class the pickle names as a local one.

    Memory-mapped, tensors are read when touched and a converter releases them once written
    (``zoo.io.releasing_pages``): a multi-GB file converts in about one tensor of memory. Legacy (pre-zip) files cannot
    be mapped and are read whole. A global outside ``allow`` and torch's safe set, or a web page saved in place of a
    download, is an InputError naming the file (``what``: what it should be); an unreadable file is a DamagedFileError.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    with open(path, "rb") as f:
        head = f.read(512)
    if head.lstrip().lower().startswith((b"<!doctype", b"<html")):
        raise InputError(f"{path} is an HTML page, not {what} (a download link answered with a web page, e.g. Google "
                         "Drive's confirmation page): download the file in a browser and convert that")
    allow = list(allow)
    mapped = head.startswith(_ZIP_MAGIC)
    try:
        with torch.serialization.safe_globals(allow):
            # a zip checkpoint's pickle is checked before anything in it is read
            refused = torch.serialization.get_unsafe_globals_in_checkpoint(path) if mapped else []
            if not refused:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=mapped)
    except pickle.UnpicklingError as err:
        found = _REFUSED.search(str(err))
        if found is None:
            raise _damaged(path, err, what) from None
        refused = [found.group(1)]
    except (RuntimeError, EOFError, ValueError) as err:  # truncated, or not a torch file at all
        raise _damaged(path, err, what) from None
    raise _refuse(path, refused, allow, what)


def _damaged(path: Path, err: Exception, what: str) -> DamagedFileError:
    # torch's messages open with advice on weights_only=False (never taken here); keep the cause
    text = str(err)
    found = re.search(r"WeightsUnpickler error:\s*([^\n]+)", text)
    reason = (found.group(1) if found else text.strip().split("\n")[0].split(". ")[0]) or type(err).__name__
    return DamagedFileError(f"{path} cannot be read as {what} ({reason}): download it again")


def preview(keys: list[str]) -> str:
    """The first ten ``keys`` (an error message's list)."""
    return f"{keys[:10]}{' …' if len(keys) > 10 else ''}"


def map_keys(source: Mapping[str, T], rules: Iterable[tuple[str, str | None]], *,
             expected: Iterable[str] = (), what: str = "the checkpoint") -> dict[str, T]:
    """``source`` with its keys renamed by ``rules``, every key accounted for. A rule ``(old, new)`` whose ``old`` is
    empty or ends with "." renames the keys under that prefix, any other ``old`` one whole key; the first match wins,
    and ``new=None`` drops the key as known to be unused. Source keys no rule matches and ``expected`` target keys
    nothing maps to are one InputError naming both."""
    rules = list(rules)
    out: dict[str, T] = {}
    unused = []
    for key, value in source.items():
        for old, new in rules:
            if key == old or ((not old or old.endswith(".")) and key.startswith(old)):
                if new is not None:
                    out[new + key[len(old):]] = value
                break
        else:
            unused.append(key)
    missing = sorted(set(expected) - set(out))
    if unused or missing:
        raise InputError(f"{what} does not fit the zoo's layout: unexpected keys {preview(sorted(unused))}, "
                         f"missing keys {preview(missing)}")
    return out


def single_file(files: Mapping[str, Path], entry: Any, what: str) -> Path:
    """The one file of a catalog entry's upstream download (a converter's ``files``), or a ConfigError."""
    if len(files) != 1:
        raise ConfigError(f"{entry.name}: expected one {what}, got {sorted(files)}")
    return next(iter(files.values()))
