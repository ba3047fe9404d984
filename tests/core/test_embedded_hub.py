"""The embedded hub as shipped: every file of every embedded catalog entry matches its pin, nothing unpinned
ships, the weights are safetensors, the card quotes the catalog's metrics, and the folder stays in budget."""

import json
from pathlib import Path

import pytest

import zoo
from zoo.io import sha256_file
from zoo.registry import get_entry

HUB = Path(__file__).resolve().parents[2] / "hub"
EMBEDDED = [n for n in zoo.list_models() if (HUB / n).is_dir()]


def test_budget_and_no_orphans():
    total = sum(p.stat().st_size for p in HUB.rglob("*") if p.is_file())
    assert total <= 40 * 2**20, f"hub/ holds {total / 2**20:.1f} MiB; the budget is 40 MiB"
    shipped = {p.name for p in HUB.iterdir() if p.is_dir()}
    assert shipped == set(EMBEDDED) and all(get_entry(n).released for n in EMBEDDED)  # every folder has an entry


@pytest.mark.parametrize("name", EMBEDDED)
def test_files_match_their_pins(name):
    entry = get_entry(name)
    folder = HUB / name
    assert {p.name for p in folder.iterdir()} == {f.path for f in entry.files}
    for f in entry.files:
        assert f.sha256 is not None and f.size is not None, f"{name}/{f.path} is not pinned"
        assert (folder / f.path).stat().st_size == f.size
        assert sha256_file(folder / f.path) == f.sha256
    assert not [f.path for f in entry.files if f.path.endswith((".bin", ".pt", ".pth", ".ckpt", ".pkl"))]
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"]


@pytest.mark.parametrize("name", EMBEDDED)
def test_card_quotes_the_catalog_metrics(name):
    entry = get_entry(name)
    card = (HUB / name / "README.md").read_text()
    assert card.startswith("---\n") and f"# {name}" in card
    for metric, value in entry.metrics.items():
        assert f"| {metric} | {value} |" in card, f"{metric}={value} is not in {name}'s card"
    if entry.recipe:
        assert (HUB.parent / entry.recipe).is_file() and entry.recipe in card


@pytest.mark.parametrize("name", EMBEDDED)
def test_card_configuration_is_the_written_config(name):
    """The card's Configuration block shows config.json's hparams, not a loaded module's (a delta loads merged)."""
    folder = HUB / name
    card = (folder / "README.md").read_text()
    block = card.split("## Configuration\n\n```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(block) == json.loads((folder / "config.json").read_text())["hparams"]
