"""Pin a repo folder: print its ``pins.json`` entry (every file's sha256 and size), or merge it into a pins file.

    python scripts/pin_repo.py hub/escaip-tiny-emt                              # print the entry
    python scripts/pin_repo.py hub/escaip-tiny-emt --into zoo/escaip/pins.json  # add or replace it there

The entry is named after the folder, with ``"revision": null`` (a Hub commit is pinned by ``zoo release``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from zoo.io import write_json_atomic
from zoo.release import pins_entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a repo folder, e.g. hub/<name>")
    parser.add_argument("--into", type=Path, help="a method's pins.json to add the entry to (replacing one of that name)")
    args = parser.parse_args()
    pinned = pins_entry(args.folder, revision=None)
    if not pinned["files"]:
        raise SystemExit(f"{args.folder} holds no files")
    entry = {args.folder.resolve().name: pinned}
    if args.into is None:
        print(json.dumps(entry, indent=2, sort_keys=True))
        return
    pins = json.loads(args.into.read_text()) if args.into.exists() else {}
    write_json_atomic(args.into, {**pins, **entry})
    print(f"{args.into}: pinned {next(iter(entry))} ({len(entry[next(iter(entry))]['files'])} files)")


if __name__ == "__main__":
    main()
