"""zoo._lightning: the first `import lightning` of a process skips what torchmetrics would import for nothing."""

import json
import os
import subprocess
import sys

from zoo._lightning import DEFERRED

_REPORT = """
import json, sys
from lightning_utilities.core.imports import RequirementCache, package_available
import zoo._lightning as lean
print(json.dumps({
    "hidden": list(lean.hidden_during_import),
    "imported": [n for n in lean.DEFERRED if n in sys.modules],
    "probe_restored": RequirementCache.__bool__.__qualname__ == "RequirementCache.__bool__",
    "fresh_probes": [bool(RequirementCache(n)) and package_available(n) for n in lean.DEFERRED],
    "torchmetrics_sees_transformers": bool(sys.modules["torchmetrics.utilities.imports"]._TRANSFORMERS_GREATER_EQUAL_4_4),
}))
"""


def _run(code: str, **env) -> dict:
    out = subprocess.run([sys.executable, "-c", code + _REPORT], capture_output=True, text=True,
                         env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_zoo_load_imports_none_of_the_deferred_packages():
    code = ("import zoo\nzoo.load('escaip-tiny-emt')\nzoo.load('chess-small-av')\n"
            "import zoo._lightning as lean\nassert lean.hidden_during_import\n")
    report = _run(code)
    assert report["hidden"] == list(DEFERRED) and report["imported"] == []
    # only torchmetrics' import-time probes were answered "absent"; everything else sees the packages again
    assert report["probe_restored"] and all(report["fresh_probes"])
    assert not report["torchmetrics_sees_transformers"]
    # and the packages themselves import normally afterwards
    after = _run("import zoo.module\nimport torchvision, matplotlib.pyplot, scipy.signal, transformers\n")
    assert after["imported"] == list(DEFERRED)


def test_nothing_is_hidden_when_lightning_came_first_or_lean_import_is_off():
    for code, env in (("import lightning\nimport zoo.module\n", {}), ("import zoo.module\n", {"ZOO_LEAN_IMPORT": "0"})):
        report = _run(code, **env)
        assert report["hidden"] == [] and report["torchmetrics_sees_transformers"], (code, env)
