"""`make demo` (scripts/demo.py) runs on the embedded default: it loads, relaxes and drives a short MD."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), "--steps", "5"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "escaip-tiny-emt" in out.stdout and "all positions finite: True" in out.stdout
