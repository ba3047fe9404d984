"""`make demo` (scripts/demo.py) runs on the embedded defaults: for a slab and for a molecule it loads, relaxes
and drives a short MD."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--steps", "5"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "escaip-tiny-emt" in out.stdout and "all positions finite: True" in out.stdout
    assert "escaip-qm9-xtb: CH3CH2OH relaxed in" in out.stdout
    # the last MD row: step 5 of the NVE run, whose net force (a conservative model's) is zero to rounding
    step, _, _, net_force = out.stdout.split("NVE MD of")[1].splitlines()[-2].split()[:4]
    assert step == "5" and float(net_force) < 1e-4
