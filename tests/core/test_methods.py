"""Every method the zoo ships agrees with itself: its registered model types, catalog entries, pins, converters,
recipes and card sources (docs/adding-a-method.md describes each piece)."""

from pathlib import Path

import pytest

from zoo.card import load_card
from zoo.module import ZooModule
from zoo.registry import import_object, methods, read_pins

ROOT = Path(__file__).resolve().parents[2]
# the zoo's own methods and their catalogs as the modules list them (other tests register more in this process)
BUILTIN = {name: spec for name, spec in methods().items() if spec.catalog and spec.catalog.startswith("zoo.")}
ENTRIES = {name: import_object(spec.catalog + ":ENTRIES") for name, spec in BUILTIN.items()}
CATALOG = {entry.name: entry for entries in ENTRIES.values() for entry in entries}


def test_the_four_methods_are_found():
    assert sorted(BUILTIN) == ["bitdelta", "chess", "escaip", "rcg"]


@pytest.mark.parametrize("method", sorted(BUILTIN))
def test_model_types_resolve_to_their_zoo_module(method):
    for model_type, path in BUILTIN[method].modules.items():
        cls = import_object(path)
        assert isinstance(cls, type) and issubclass(cls, ZooModule), path
        assert (cls.model_type, cls.method) == (model_type, method), path


@pytest.mark.parametrize("method", sorted(BUILTIN))
def test_catalog_entries_belong_to_their_method_and_pins_to_their_catalog(method):
    entries = {entry.name: entry for entry in ENTRIES[method]}
    assert len(entries) == len(ENTRIES[method]), "a catalog lists a name twice"
    assert {entry.method for entry in entries.values()} == {method}
    # pins.json beside the catalog (written by `zoo release`) pins exactly the released entries
    pins = read_pins(BUILTIN[method].catalog.rpartition(".")[0])
    assert sorted(pins) == sorted(name for name, entry in entries.items() if entry.released)
    for name, pin in pins.items():
        assert (entries[name].files, entries[name].revision) == (pin["files"], pin["revision"]), name


@pytest.mark.parametrize("name", sorted(n for n, e in CATALOG.items() if (ROOT / "hub" / n).is_dir()))
def test_embedded_mirror_holds_the_pinned_files(name):
    """Names and sizes; tests/core/test_embedded_hub.py also checks every byte against the sha256 pins."""
    folder = ROOT / "hub" / name
    assert {p.name: p.stat().st_size for p in folder.iterdir()} == {f.path: f.size for f in CATALOG[name].files}


def test_converters_import_and_are_callable():
    converters = {entry.converter for entry in CATALOG.values() if entry.converter}
    assert converters, "no catalog entry names a converter"
    for path in converters:
        assert callable(import_object(path)), path
    for entry in CATALOG.values():  # a converter lives in its entry's own method
        assert entry.converter is None or entry.converter.startswith(f"zoo.{entry.method}."), entry.name
        assert bool(entry.upstream) == bool(entry.converter), entry.name


def test_recipes_exist():
    for entry in CATALOG.values():
        assert entry.recipe is None or (ROOT / entry.recipe).is_file(), (entry.name, entry.recipe)


def test_card_sources_are_valid_and_name_a_catalog_entry():
    cards = sorted(ROOT.glob("recipes/*/cards/*.yaml"))
    assert cards
    for path in cards:
        card = load_card(path)
        assert card["name"] == path.stem and path.stem in CATALOG, path
        assert CATALOG[path.stem].method == path.parent.parent.name, path


def test_pin_repo_script_writes_the_pins_the_catalog_holds(tmp_path):
    """scripts/pin_repo.py, the first pinning step for a new entry, writes exactly what pins.json holds."""
    import json
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "pins.json"
    subprocess.run([sys.executable, str(repo / "scripts" / "pin_repo.py"), str(repo / "hub" / "escaip-tiny-emt"),
                    "--into", str(out)], check=True, capture_output=True)
    shipped = json.loads((repo / "zoo" / "escaip" / "pins.json").read_text())["escaip-tiny-emt"]
    assert json.loads(out.read_text()) == {"escaip-tiny-emt": shipped}
