"""The training recipes (``recipes/`` of the source tree), reachable from an installed zoo.

The wheel ships ``recipes/`` as the package ``zoo._recipes``; ``zoo recipe`` lists them, prints one, or copies one
(or a whole folder, e.g. ``chess``) to edit and run. Torch-free.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from zoo.errors import ZooError
from zoo.hparams import closest

__all__ = ["recipe_root", "list_recipes", "find_recipe", "copy_recipe", "RecipeNotFoundError"]

_KINDS = (".yaml", ".sh", ".py", ".md")


class RecipeNotFoundError(ZooError, FileNotFoundError):
    """No recipe of that name."""


def recipe_root() -> Path:
    """The wheel's ``zoo/_recipes``, or the ``recipes/`` folder of the source checkout this package runs from
    (an editable install does not map that folder into the package)."""
    installed = Path(__file__).resolve().parent / "_recipes"
    return installed if installed.is_dir() else Path(__file__).resolve().parent.parent / "recipes"


def list_recipes() -> list[str]:
    """Every recipe file, as a path relative to the recipes folder (``chess/small_cpu.yaml``)."""
    root = recipe_root()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.suffix in _KINDS and "__pycache__" not in p.parts)


def find_recipe(name: str) -> Path:
    """A recipe file or folder by name: ``chess/small_cpu``, ``chess/small_cpu.yaml``, ``recipes/chess/…``, ``chess``."""
    root = recipe_root()
    rel = name.removeprefix("recipes/").strip("/")
    for candidate in (root / rel, root / f"{rel}.yaml"):
        if rel and (candidate.is_file() or candidate.is_dir()):
            return candidate
    names = list_recipes()
    close = closest(rel, names, n=5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise RecipeNotFoundError(f"no recipe {name!r}.{hint} `zoo recipe` lists them all.")


def copy_recipe(name: str, out: str | Path) -> Path:
    """Copy a recipe file (or folder) to ``out`` (a folder, or a file name for one recipe); never overwrites."""
    source = find_recipe(name)
    out = Path(out)
    target = out / source.name if out.is_dir() else out
    if target.exists():
        raise ZooError(f"{target} already exists; remove it or choose another --out")
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copyfile(source, target)
    return target
