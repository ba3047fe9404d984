"""`make test-floors` runs the suite at the declared floors: constraints/floors.txt (and the Makefile's torch pair)
pin every dependency of pyproject.toml at its floor, and nothing at another version."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def _pins(lines: list[str], operator: str) -> dict[str, Version]:
    pins = {}
    for line in lines:
        requirement = Requirement(line)
        pins[canonicalize_name(requirement.name)] = next(
            Version(s.version) for s in requirement.specifier if s.operator == operator)
    return pins


def test_the_floors_run_pins_each_dependency_at_its_floor():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    required = _pins(project["dependencies"], ">=")
    declared = {**_pins([r for extra in project["optional-dependencies"].values() for r in extra
                         if ">=" in r], ">="), **required}
    lines = [line.split("#")[0].strip() for line in (REPO / "constraints" / "floors.txt").read_text().splitlines()]
    torch_pair = re.search(r"^TORCH\s*:=\s*(.*)$", (REPO / "Makefile").read_text(), flags=re.M).group(1)
    pinned = _pins([line for line in lines if line] + re.findall(r'"([^"]+)"', torch_pair), "==")
    # Lightning requires its twin package unpinned: the floors run holds it to the same release
    assert pinned.pop("pytorch-lightning") == pinned["lightning"]
    assert required.keys() <= pinned.keys()
    assert {name: declared.get(name) for name in pinned} == pinned
