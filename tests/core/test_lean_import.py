"""zoo._lightning: the first `import lightning` of a process skips what torchmetrics would import for nothing."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo._lightning import DEFERRED, DYNAMO_STAND_IN_TESTED, installed_in

ZOO = Path(__file__).resolve().parents[2] / "zoo"


def test_every_lightning_import_of_the_zoo_is_zoo_lightning():
    """What the first `import lightning` hides must not depend on which zoo module a process imports first."""
    lightning = {"lightning", "pytorch_lightning", "lightning_fabric"}
    direct = []
    for path in ZOO.rglob("*.py"):
        if path == ZOO / "_lightning.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
            direct += [f"{path.relative_to(ZOO.parent)}:{node.lineno} imports {name}" for name in names
                       if name and name.partition(".")[0] in lightning]
    assert not direct, "import Lightning through zoo._lightning (from zoo._lightning import L, ...): " + str(direct)

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


def _run(code: str, report: str = _REPORT, **env) -> dict:
    out = subprocess.run([sys.executable, "-c", code + report], capture_output=True, text=True,
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


_DYNAMO = """
import json, sys, torch
import lightning.fabric.wrappers as wrappers, lightning.pytorch.utilities.compile as compile_utils
from lightning.pytorch.trainer.connectors.logger_connector import result

def disabled():  # Lightning's functions that torch.compile must not trace
    return sorted(f"{cls.__name__}.{name}" for cls in vars(result).values() if isinstance(cls, type)
                  for name, value in vars(cls).items() if getattr(value, "_torchdynamo_disable", False))

before = {"dynamo_imported": "torch._dynamo" in sys.modules,
          "compiled_check": isinstance(torch.nn.Linear(1, 1), wrappers.OptimizedModule)}
compiled = torch.compile(torch.nn.Linear(2, 2), backend="eager")
print(json.dumps({**before, "disabled": disabled(),
    "optimized_module_is_real": wrappers.OptimizedModule is compile_utils.OptimizedModule
                                is sys.modules["torch._dynamo"].OptimizedModule,
    "compiled_check": isinstance(compiled, wrappers.OptimizedModule),
    "torch_attr": torch._dynamo is sys.modules["torch._dynamo"]}))
"""


@pytest.mark.skipif(not installed_in(DYNAMO_STAND_IN_TESTED), reason=f"stand-in tested with {DYNAMO_STAND_IN_TESTED}")
def test_torch_dynamo_waits_for_the_first_compile_and_leaves_lightning_as_upstream_after_it():
    lean = _run("import zoo\nzoo.load('chess-small-av')\n", _DYNAMO)
    assert lean["dynamo_imported"] is False and lean["compiled_check"] is True
    assert lean["optimized_module_is_real"] and lean["torch_attr"]
    upstream = _run("import zoo.module\n", _DYNAMO, ZOO_LEAN_IMPORT="0")
    assert upstream["dynamo_imported"] is True
    # after the first compile, the same Lightning functions are dynamo-disabled as with a plain `import lightning`
    assert lean["disabled"] == upstream["disabled"] and upstream["disabled"]


def test_the_dynamo_stand_in_is_used_only_with_the_releases_it_is_tested_on():
    assert DYNAMO_STAND_IN_TESTED == {"lightning": ">=2.6,<2.7", "torch": ">=2.14,<2.15"}  # tested: 2.6.6, 2.14.1
    # as with lightning 2.7: Lightning's import brings in the real torch._dynamo itself
    outside = _run("import importlib.metadata as metadata\n"
                   "installed = metadata.version\n"
                   "metadata.version = lambda name: '2.7.0' if name == 'lightning' else installed(name)\n"
                   "import zoo._lightning\n",
                   report="import json, sys\n"
                          "print(json.dumps({'dynamo': type(sys.modules.get('torch._dynamo')).__name__}))\n")
    assert outside == {"dynamo": "module"}


def test_a_compiled_module_trains_after_a_lean_import(tmp_path):
    code = f"""
import torch, zoo.module
from zoo._lightning import L

class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
    def training_step(self, batch, batch_idx):
        loss = self.layer(batch).pow(2).mean()
        self.log("loss", loss)
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

model = Tiny()
compiled = torch.compile(model, backend="eager")
trainer = L.Trainer(max_steps=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, default_root_dir={str(tmp_path)!r})
trainer.fit(compiled, torch.utils.data.DataLoader(torch.randn(12, 4), batch_size=4))
assert trainer.global_step == 3 and trainer.lightning_module is model
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]


def test_a_torchvision_built_for_another_torch_is_one_error_saying_how_to_install_a_pair(tmp_path):
    # torchvision as installed, but with operator libraries this torch cannot load (as PyPI's CUDA build beside a CPU
    # torch): its import fails as "operator torchvision::nms does not exist", deep in Lightning, timm or transformers
    import importlib.util
    from pathlib import Path

    installed = Path(importlib.util.find_spec("torchvision").submodule_search_locations[0])
    (tmp_path / "torchvision").mkdir()
    for item in installed.iterdir():
        if item.suffix == ".so":
            (tmp_path / "torchvision" / item.name).write_bytes(b"not a library")
        elif item.name != "__pycache__":
            (tmp_path / "torchvision" / item.name).symlink_to(item)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    for command in (["-m", "zoo.cli", "load", "llama-bytes-3m"], ["-c", "import zoo; zoo.load('escaip-tiny-emt')"]):
        out = subprocess.run([sys.executable, *command], capture_output=True, text=True, env=env)
        assert out.returncode != 0
        last = out.stderr.strip().splitlines()[-1]
        assert "install torch and torchvision as a matched pair, from one index: pip install" in last
        if command[0] == "-m":  # the command line: that one line
            assert out.stderr.startswith("zoo: error: torchvision ") and out.stderr.count("\n") == 1
        else:
            assert last.startswith("zoo.errors.InstallError: torchvision ")
