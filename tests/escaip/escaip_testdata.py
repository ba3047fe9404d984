"""Paths and loaders for the EScAIP fixtures (official tiny models, their configs and outputs)."""

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "escaip"


def official_config(variant: str) -> dict:
    return json.loads((FIXTURES / f"{variant}_config.json").read_text())
