"""No import cycles in zoo/: every import, function-level ones included, forms a DAG; and every module imports
alone in a fresh interpreter, in that order (a cycle broken only by a function-level import is still a cycle)."""

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ZOO = Path(__file__).resolve().parents[2] / "zoo"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ZOO.rglob("*.py"):
        name = ".".join(path.relative_to(ZOO.parent).with_suffix("").parts).removesuffix(".__init__")
        mods[name] = path
    return mods


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                found = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in found:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                # the package root `zoo` only re-exports lazily: importing a name from it is not an edge back
                if target and target not in (name, "zoo"):
                    targets.add(target)
        graph[name] = targets
    return graph


def test_no_cycles_and_each_module_imports_alone():
    try:
        order = list(TopologicalSorter(_graph()).static_order())
    except CycleError as err:
        raise AssertionError(f"import cycle: {' -> '.join(err.args[1])}") from None
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    core = [m for m in order if m.count(".") == 1 and not m.startswith("zoo._recipes")]
    for name in core:  # a fresh interpreter per core module: each must import with nothing imported before it
        out = subprocess.run([sys.executable, "-c", code, name], capture_output=True, text=True)
        assert out.returncode == 0, f"{name}: {out.stderr[-2000:]}"
