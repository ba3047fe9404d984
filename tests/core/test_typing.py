"""Loads are typed by their class: ``from_pretrained`` returns ``Self``, no method overrides it, and every catalog model
loads as the class of its method, so e.g. ``EScAIPModule.from_pretrained("escaip-tiny-emt")`` is an EScAIPModule."""

import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import zoo
from zoo.module import ZooModule
from zoo.registry import import_object, methods, resolve_module_class

ROOT = Path(__file__).resolve().parents[2]


def _builtin_entries() -> dict:
    """The zoo's own catalogs, as their modules list them (other tests register more models in this process)."""
    return {e.name: e for spec in methods().values() if (spec.catalog or "").startswith("zoo.")
            for e in import_object(spec.catalog + ":ENTRIES")}


def test_loaders_return_self_and_no_method_overrides_them():
    # the annotations stay strings (`from __future__ import annotations`): Self is imported for type checkers only
    for name in ("from_pretrained", "from_checkpoint", "from_state_dict", "build_on_meta"):
        assert inspect.signature(getattr(ZooModule, name)).return_annotation == "Self", name
    for spec in methods().values():
        for model_type in spec.modules:
            cls = resolve_module_class(model_type)
            assert issubclass(cls, ZooModule), model_type
            for name in ("from_pretrained", "from_checkpoint"):  # an override could return another type
                assert getattr(cls, name).__func__ is getattr(ZooModule, name).__func__, (model_type, name)


def test_every_catalog_model_loads_as_its_methods_class():
    entries = _builtin_entries()
    registered = {t: spec.name for spec in methods().values() for t in spec.modules}
    for name, entry in entries.items():
        config = ROOT / "hub" / name / "config.json"
        if config.is_file():  # embedded: exactly the class its config.json names, a class of the entry's method
            model_type = json.loads(config.read_text())["model_type"]
            assert registered[model_type] == entry.method, name
            assert resolve_module_class(model_type).method == entry.method, name
        else:  # converted on first use: at least one class of its method
            assert entry.method in registered.values(), name


def test_a_class_loads_its_own_models_only():
    from zoo.chess.module import ChessTransformerModule
    from zoo.escaip.module import EScAIPModule

    model = EScAIPModule.from_pretrained("escaip-tiny-emt")
    assert type(model) is EScAIPModule and callable(model.as_calculator)
    assert type(zoo.load("escaip-tiny-emt")) is EScAIPModule  # zoo.load is ZooModule.from_pretrained
    with pytest.raises(TypeError, match="holds a EScAIPModule, not a ChessTransformerModule"):
        ChessTransformerModule.from_pretrained("escaip-tiny-emt")


TYPED_CALL = """
from zoo.escaip.module import EScAIPModule
from zoo.module import ZooModule

model = EScAIPModule.from_pretrained("escaip-tiny-emt")
reveal_type(model)
model.as_calculator()
reveal_type(ZooModule.from_pretrained("escaip-tiny-emt"))
"""


@pytest.mark.skipif(shutil.which("pyright") is None, reason="needs pyright on PATH")
def test_a_typed_call_type_checks(tmp_path):
    (tmp_path / "typed_call.py").write_text(textwrap.dedent(TYPED_CALL))
    run = subprocess.run(["pyright", "--pythonpath", sys.executable, "typed_call.py"], cwd=tmp_path,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0 and 'Type of "model" is "EScAIPModule"' in run.stdout, run.stdout
    assert 'from_pretrained("escaip-tiny-emt")" is "ZooModule"' in run.stdout, run.stdout
