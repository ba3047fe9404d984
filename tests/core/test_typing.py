"""zoo.load's typing overloads (zoo/__init__.py) name every catalog model, each with the class it loads as."""

import ast
import importlib
import json
from pathlib import Path

import zoo
from zoo.registry import import_object, methods, resolve_module_class

ROOT = Path(__file__).resolve().parents[2]


def _overloads() -> dict[str, type]:
    """Catalog name -> the return class of the ``load`` overload that lists it."""
    tree = ast.parse(Path(zoo.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    where = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    names = {}
    for node in block.body:
        if not (isinstance(node, ast.FunctionDef) and node.name == "load" and node.decorator_list):
            continue
        annotation = node.args.args[0].annotation
        if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "Literal":
            values = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            cls = getattr(importlib.import_module(where[node.returns.id]), node.returns.id)
            for value in values:
                assert value.value not in names, f"{value.value} is in two overloads"
                names[value.value] = cls
    return names


def test_every_catalog_model_has_its_class():
    overloads = _overloads()
    # the zoo's own catalogs, as their modules list them (other tests register more models in this process)
    builtin = {e.name: e for spec in methods().values() if (spec.catalog or "").startswith("zoo.")
               for e in import_object(spec.catalog + ":ENTRIES")}
    assert sorted(overloads) == sorted(builtin)
    for name, cls in overloads.items():
        config = ROOT / "hub" / name / "config.json"
        if config.is_file():  # embedded: exactly the class its config.json names
            assert resolve_module_class(json.loads(config.read_text())["model_type"]) is cls, name
        else:  # converted on first use: at least the method's
            assert cls.method == builtin[name].method, name
