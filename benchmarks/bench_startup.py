"""Start-up costs of the zoo against ``python -c "import torch"``, each in a fresh process, in the same run.

The commands that only read the catalog or print help should cost about a bare interpreter; ``zoo chess uci``
should answer ``uci`` as fast; ``zoo.load`` of a small model should cost at most ``import torch`` + 1 s. Two
reference rows show what a plain ``import lightning`` costs, and ``zoo.load`` with the lean Lightning import
switched off (``ZOO_LEAN_IMPORT=0``). Every case runs once per round, the rounds interleave the cases (so a
busy machine slows all of them alike), and the table gives each case's median. A second table times
``go movetime`` answers of the UCI engine (chess-small-av, one thread) from the command to ``bestmove``.

    python benchmarks/bench_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

PY = sys.executable
ZOO = [PY, "-m", "zoo.cli"]
UCI_MODEL = "chess-small-av"
UCI_OK, UCI_READY = f"zoo chess uci {UCI_MODEL}: uciok", f"zoo chess uci {UCI_MODEL}: readyok"

CASES = {  # name -> (command, extra environment)
    "python -c pass": ([PY, "-c", "pass"], {}),
    "import torch (baseline)": ([PY, "-c", "import torch"], {}),
    "zoo --help": ([*ZOO, "--help"], {}),
    "zoo list": ([*ZOO, "list"], {}),
    "zoo info escaip-tiny-emt": ([*ZOO, "info", "escaip-tiny-emt"], {}),
    "zoo lsit (a typo)": ([*ZOO, "lsit"], {}),
    "zoo download escaip-tiny-emt": ([*ZOO, "download", "escaip-tiny-emt"], {}),
    UCI_OK: (None, {}),  # both from one UCI session: from the start of the process
    UCI_READY: (None, {}),
    "zoo.load('escaip-tiny-emt')": ([PY, "-c", "import zoo; zoo.load('escaip-tiny-emt')"], {}),
    "zoo.load('chess-small-av')": ([PY, "-c", "import zoo; zoo.load('chess-small-av')"], {}),
    "ref: import lightning": ([PY, "-c", "import lightning"], {}),
    "ref: zoo.load('escaip-tiny-emt'), ZOO_LEAN_IMPORT=0": (
        [PY, "-c", "import zoo; zoo.load('escaip-tiny-emt')"], {"ZOO_LEAN_IMPORT": "0"}),
}
MOVETIMES = (50, 100, 200, 500)


def run(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **env})
    return time.perf_counter() - start


class UCISession:
    """``zoo chess uci`` in a subprocess; ``until`` sends a line and returns the seconds to a reply prefix."""

    def __init__(self):
        self.start = time.perf_counter()
        self.proc = subprocess.Popen([*ZOO, "chess", "uci", UCI_MODEL, "--threads", "1"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def until(self, line: str, reply: str, since: float | None = None) -> float:
        sent = time.perf_counter()
        self.send(line)
        for out in self.proc.stdout:
            if out.startswith(reply):
                return time.perf_counter() - (sent if since is None else since)
        raise RuntimeError(f"zoo chess uci ended before answering {line!r} with {reply!r}")

    def close(self) -> None:
        self.send("quit")
        self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="rounds; each case runs once per round (default: 5)")
    args = parser.parse_args()

    times: dict[str, list[float]] = {name: [] for name in CASES}
    movetimes: dict[int, list[float]] = {ms: [] for ms in MOVETIMES}
    for round_ in range(args.repeats):
        for name, (command, env) in CASES.items():
            if command is not None:
                times[name].append(run(command, env))
            elif name == UCI_OK:  # one session gives both UCI rows and the movetime answers
                session = UCISession()
                times[UCI_OK].append(session.until("uci", "uciok", since=session.start))
                times[UCI_READY].append(session.until("isready", "readyok", since=session.start))
                for ms in MOVETIMES:
                    session.send("position startpos moves e2e4 e7e5")
                    movetimes[ms].append(session.until(f"go movetime {ms}", "bestmove"))
                session.close()
        print(f"round {round_ + 1}/{args.repeats} done", file=sys.stderr)

    base = statistics.median(times["import torch (baseline)"])
    width = max(map(len, CASES))
    print(f"start-up, median of {args.repeats} fresh processes; python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"{'case':{width}s}  {'seconds':>8s}  {'x torch':>7s}  {'- torch':>8s}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:{width}s}  {median:8.2f}  {median / base:7.2f}  {median - base:+8.2f}")
    print(f"\nzoo chess uci {UCI_MODEL} --threads 1: go movetime -> bestmove, median of {args.repeats}")
    print(f"{'movetime ms':>11s}  {'reply ms':>8s}  {'max ms':>6s}  {'reply / movetime':>16s}")
    for ms, values in movetimes.items():
        median = 1000 * statistics.median(values)
        print(f"{ms:11d}  {median:8.0f}  {1000 * max(values):6.0f}  {median / ms:16.2f}")


if __name__ == "__main__":
    main()
