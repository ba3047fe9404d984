"""Pin a repo folder: print its ``pins.json`` entry (every file's sha256 and size), or merge it into a pins file.

    python scripts/pin_repo.py hub/escaip-tiny-emt                              # print the entry
    python scripts/pin_repo.py hub/escaip-tiny-emt --into zoo/escaip/pins.json  # add or replace it there

The entry is named after the folder, with ``"revision": null`` (a Hub commit is pinned by ``zoo release``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from zoo.io import sha256_file, write_json_atomic


def pins_of(folder: Path) -> dict:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise SystemExit(f"{folder} holds no files")
    return {"files": [{"path": p.relative_to(folder).as_posix(), "sha256": sha256_file(p), "size": p.stat().st_size}
                      for p in files], "revision": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a repo folder, e.g. hub/<name>")
    parser.add_argument("--into", type=Path, help="a method's pins.json to add the entry to (replacing one of that name)")
    args = parser.parse_args()
    entry = {args.folder.resolve().name: pins_of(args.folder)}
    if args.into is None:
        print(json.dumps(entry, indent=2, sort_keys=True))
        return
    pins = json.loads(args.into.read_text()) if args.into.exists() else {}
    write_json_atomic(args.into, {**pins, **entry})
    print(f"{args.into}: pinned {next(iter(entry))} ({len(entry[next(iter(entry))]['files'])} files)")


if __name__ == "__main__":
    main()
