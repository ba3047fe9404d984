"""Pins and their checks: a file's sha256 and size, measured for a folder (what a catalog entry pins) and checked
before any file reaches a model. A successful check is remembered (keyed by path, size, mtime and inode) under
``$ZOO_HOME/verified``, so a multi-GB file is not hashed on every load. A file of the HF cache is also checked
against what the server announced for it (its ETag: an LFS sha256 or a git blob id).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any, Iterable

from zoo.errors import IntegrityError
from zoo.io import hash_file, sha256_file, storage_error, write_text_atomic
from zoo.registry import FileSpec
from zoo.settings import zoo_home

_home_unwritable_said = False


def home_unwritable(err: OSError) -> None:
    """For a lock or a verified-file mark ZOO_HOME cannot take (read-only, or full): go on without it, and say once per
    process that loads are slower for it. Any other fault is raised."""
    global _home_unwritable_said
    if storage_error(err) is None:
        raise err
    if not _home_unwritable_said:
        _home_unwritable_said = True
        logging.getLogger(__name__).warning(
            "zoo: cannot write to ZOO_HOME %s (%s): loading without its download locks and verified-file marks, so "
            "every load hashes its files again and is slower; set ZOO_HOME to a writable folder to keep them",
            zoo_home(), os.strerror(err.errno))


def _mark(path: Path) -> tuple[Path, str]:
    """The verified-file mark of ``path`` and the file's stamp now: size, mtime and inode (a rewrite changes them)."""
    st = path.stat()
    return (zoo_home() / "verified" / hashlib.sha256(str(path.resolve()).encode()).hexdigest(),
            f"{st.st_size} {st.st_mtime_ns} {st.st_ino}")


def _remembered_sha256(path: Path) -> str | None:
    """The sha256 of ``path`` if a check measured it and the file has not changed since, else None."""
    marker, stamp = _mark(path)
    if not marker.exists():
        return None
    sha256, _, marked = marker.read_text().partition(" ")
    return sha256 if marked == stamp else None


def remember(path: Path, sha256: str) -> None:
    """Mark ``path``, as it is now, as holding the bytes of ``sha256``: a later check of it hashes nothing."""
    marker, stamp = _mark(path)
    try:
        write_text_atomic(marker, f"{sha256} {stamp}")
    except OSError as err:  # only a shortcut for the next load: a load goes on without it
        home_unwritable(err)


def file_pin(path: Path) -> dict[str, Any]:
    """What a catalog entry pins of a file: ``{"sha256", "size"}`` (hashed unless remembered)."""
    return {"sha256": _remembered_sha256(path) or sha256_file(path), "size": path.stat().st_size}


def file_pins(folder: Path, paths: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """``{path: file_pin}`` for ``paths`` inside ``folder``, by default every file in it but dot files."""
    if paths is None:
        paths = [p.relative_to(folder).as_posix() for p in sorted(folder.rglob("*"))
                 if p.is_file() and not p.name.startswith(".")]
    return {path: file_pin(folder / path) for path in paths}


def mismatch(spec: FileSpec, path: Path) -> str | None:
    """None when ``path`` holds exactly the pinned bytes, else what differs, for an error message; the file is hashed
    at most once, and a match is remembered (:func:`remember`)."""
    size = path.stat().st_size
    if spec.size is not None and size != spec.size:
        got = f"size {size} bytes (expected {spec.size})"
    elif _remembered_sha256(path) == spec.sha256:
        return None
    elif (actual := sha256_file(path)) != spec.sha256:
        got = f"sha256 {actual}"
    else:
        remember(path, actual)
        return None
    return f"{spec.path}: content does not match its pin (expected sha256 {spec.sha256}, got {got})"


def matches(path: Path, spec: FileSpec) -> bool:
    return mismatch(spec, path) is None


def verify_file(path: Path, spec: FileSpec, *, delete_bad: bool) -> None:
    """Check ``path`` against ``spec``; on mismatch delete it (if ``delete_bad``) and raise IntegrityError."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{spec.path}: expected at {path}, but it is missing")
    if (message := mismatch(spec, path)) is None:
        return
    if delete_bad:
        delete_copy(path)
        raise IntegrityError(f"{message}. The bad copy was deleted; loading again downloads it afresh.")
    raise IntegrityError(f"{message}. The file {path} is part of a folder the zoo does not own: restore it "
                         "(e.g. `git checkout`) or remove the folder to load the model from the Hub.")


def delete_copy(path: Path) -> None:
    """Remove a cached file; for an HF snapshot symlink, remove the blob it points to as well."""
    for p in {Path(path), Path(os.path.realpath(path))}:
        p.unlink(missing_ok=True)


def git_blob_id(path: Path) -> str:
    return hash_file(path, hashlib.sha1(b"blob %d\0" % path.stat().st_size))


def matches_server_claim(path: Path) -> bool:
    """Whether an HF cache file holds what the server announced: its blob is named by the ETag, which is the
    sha256 of an LFS file or the git blob id of a regular one."""
    claim = Path(os.path.realpath(path)).name
    if len(claim) == 64 and sha256_file(path) == claim:
        remember(path, claim)
        return True
    return len(claim) == 40 and git_blob_id(path) == claim

