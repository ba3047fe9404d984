"""Print the ``files=`` pins (path, sha256, size) of a repo folder, ready to paste into a catalog entry.

    python scripts/pin_repo.py hub/escaip-tiny-emt
"""

from __future__ import annotations

import sys
from pathlib import Path

from zoo._io import sha256_file


def main(folder: str) -> None:
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    if not files:
        raise SystemExit(f"{root} holds no files")
    print("files=(")
    for p in files:
        print(f'    FileSpec("{p.relative_to(root).as_posix()}", "{sha256_file(p)}", {p.stat().st_size}),')
    print("),")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
