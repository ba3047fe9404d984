"""Paths and loaders for the chess fixtures (official outputs, see tests/fixtures/chess/README.md)."""

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chess"


def load_json(name: str):
    return json.loads((FIXTURES / name).read_text())
