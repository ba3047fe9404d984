"""Action-value evaluation speed of the 9M ChessBench architecture on CPU: positions per second.

Three ways to score every legal move of a set of positions, measured in the same process:
  * naive       - one forward pass per move (batch of 1), the obvious loop;
  * per-position - all legal moves of one position in one forward (the official engine);
  * batched     - all legal moves of many positions in one forward (``ChessEngine.analyse_many``).
Weights are random (speed does not depend on them); the positions come from seeded random games.

    python benchmarks/bench_chess.py [--positions 8] [--threads 2] [--arch 9M]
"""

from __future__ import annotations

import argparse
import random
import time

import chess
import numpy as np
import torch

from zoo.chess.engine import legal_moves
from zoo.chess.model import CONFIGS
from zoo.chess.module import ChessTransformerModule


def random_positions(n: int, seed: int = 0) -> list[chess.Board]:
    rng = random.Random(seed)
    boards = []
    while len(boards) < n:
        board = chess.Board()
        for _ in range(rng.randint(4, 60)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if any(board.legal_moves):
            boards.append(board)
    return boards


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, default=8)
    parser.add_argument("--naive-positions", type=int, default=1, help="the naive loop is slow: time it on fewer positions")
    parser.add_argument("--batch-size", type=int, default=256, help="rows per forward of the batched engines")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--arch", default="9M", choices=sorted(CONFIGS))
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    module = ChessTransformerModule(policy="action_value", **CONFIGS[args.arch]).eval()
    boards = random_positions(args.positions)
    n_moves = sum(len(legal_moves(b)) for b in boards)

    engine = module.engine(batch_size=args.batch_size)
    single = module.engine(batch_size=1)

    def naive():
        for board in boards[: args.naive_positions]:
            single.analyse(board)

    rows = []
    naive_time = timed(naive, 1) / args.naive_positions
    rows.append(("naive: one move per forward", 1 / naive_time))
    per_position_time = timed(lambda: [engine.analyse(b) for b in boards], args.repeats) / len(boards)
    rows.append(("per position: its legal moves in one forward", 1 / per_position_time))
    batched_time = timed(lambda: engine.analyse_many(boards), args.repeats) / len(boards)
    rows.append((f"batched: {len(boards)} positions in one forward", 1 / batched_time))

    # the three must agree (same numbers, different batching)
    a = engine.analyse_many(boards[:2])
    b = [single.analyse(x) for x in boards[:2]]
    agree = max(float(np.abs(x.win_probs - y.win_probs).max()) for x, y in zip(a, b))

    params = module.model.num_params()
    print(f"\nChessBench {args.arch} action-value ({params:,} params), CPU, {args.threads} threads, "
          f"{len(boards)} positions / {n_moves} legal moves (avg {n_moves / len(boards):.1f}); max |diff| {agree:.1e}\n")
    print(f"{'method':<48}{'positions/s':>14}{'moves/s':>12}{'vs naive':>10}")
    avg = n_moves / len(boards)
    for name, pps in rows:
        print(f"{name:<48}{pps:>14.2f}{pps * avg:>12.1f}{pps / rows[0][1]:>9.1f}x")


if __name__ == "__main__":
    main()
