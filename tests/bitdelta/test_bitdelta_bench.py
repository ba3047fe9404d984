import runpy
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_bitdelta.py"


def test_benchmark_prints_the_ratio_table(monkeypatch, capsys):
    argv = [str(BENCH), "--tenants", "1", "3", "--seq", "2", "--hidden", "64", "--intermediate", "128",
            "--layers", "1", "--heads", "2", "--vocab", "64", "--repeats", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(BENCH), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    table = [line.split() for line in lines if line.split() and line.split()[0].isdigit()]
    assert [row[:2] for row in table] == [["1", "2"], ["3", "2"]]
    one, three = (float(row[4]) for row in table)  # memory ratio: N merged copies / one base + N deltas
    assert 0.9 < one < 1.1 and three > 2
