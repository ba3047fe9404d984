"""Regenerate the model table in README.md from the catalog (between the zoo:models markers)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from zoo.cli import model_table

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- zoo:models:start -->", "<!-- zoo:models:end -->"


def render(text: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{README} lacks the {START} … {END} markers")
    return pattern.sub(f"{START}\n{model_table(markdown=True)}\n{END}", text)


def main() -> int:
    text = README.read_text()
    new = render(text)
    if "--check" in sys.argv:
        if new != text:
            print("README.md's model table is stale: run `make readme`")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
