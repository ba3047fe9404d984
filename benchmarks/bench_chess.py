"""Action-value engine speed of the 9M ChessBench network on CPU, in positions per CPU-second at one thread.

Workload (issue 31): choose a move in each of N positions from seeded random games, scoring every legal move with
one network row, as the official engine does (its tokenization, the network, the repetition rule, the choice).
Rows, all measured in this process, interleaved round by round on the same positions:
  * official  - google-deepmind/searchless_chess's ``ActionValueEngine`` on JAX/Haiku, ``batch_size=1`` as its
                engine builder sets it (one jitted forward per legal move), in a child process pinned to one CPU
                (XLA does not keep to one thread otherwise). Needs ``jax``, ``dm-haiku`` and a checkout of that
                repository (``--official PATH``); they are benchmark-only, not zoo dependencies. Its weights are
                its own random init, converted into the zoo models so all rows compute the same function.
  * zoo old   - the previous zoo engine: the full forward (every position's outputs) on all legal moves at once;
  * zoo fp32  - the default engine (``LastPositionPredictor``, float32, exact);
  * zoo bf16  - ``precision="bf16"`` (opt-in; changes numerics, so its agreement with fp32 is reported).
Ratios are against the official row, or against ``zoo old`` when the official code cannot run here (then the
earlier measurement of the official engine on this machine, 1.8 positions per CPU-second, is printed as an anchor).

    python benchmarks/bench_chess.py [--positions 64] [--official /path/to/searchless_chess] [--agreement-positions 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import chess
import numpy as np
import torch

EARLIER_OFFICIAL = 1.8  # positions per CPU-second, official engine, 9M, 1 thread, measured earlier on this machine
CPU = 0  # the one CPU both the zoo and the official child run on


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


# ----------------------------------------------------------------------------- the official engine (child process)


def official_worker(repo: str, positions: int, seed: int, params_out: str) -> None:
    """Serve the official engine on stdin/stdout: ``play i j`` -> CPU seconds for positions i..j-1;
    ``probs i j`` -> their win probabilities (JSON); ``quit``."""
    os.sched_setaffinity(0, {CPU})
    import types
    from unittest import mock

    # the official modules import Beam coders, Grain and jaxtyping for data loading and annotations the engine
    # never uses: stand-ins so that only jax, haiku and the official code itself are needed
    for name in ("apache_beam", "grain", "grain.python", "jaxtyping"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = mock.MagicMock()
    package = types.ModuleType("searchless_chess")
    package.__path__ = [repo]  # the checkout as the ``searchless_chess`` package, whatever its folder is called
    sys.modules["searchless_chess"] = package
    import jax
    from searchless_chess.src import tokenizer, transformer, utils
    from searchless_chess.src.engines import neural_engines

    config = transformer.TransformerConfig(  # the official 9M engine's predictor (engines/constants.py)
        vocab_size=utils.NUM_ACTIONS, output_size=128, pos_encodings=transformer.PositionalEncodings.LEARNED,
        max_sequence_length=tokenizer.SEQUENCE_LENGTH + 2, num_heads=8, num_layers=8, embedding_dim=256,
        apply_post_ln=True, apply_qk_layernorm=False, use_causal_mask=False,
    )
    predictor = transformer.build_transformer_predictor(config)
    params = predictor.initial_params(rng=jax.random.PRNGKey(1), targets=np.ones((1, 1), dtype=np.uint32))
    np.savez(params_out, **{f"{module}/{name}": np.asarray(v) for module, tree in params.items() for name, v in tree.items()})
    _, values = utils.get_uniform_buckets_edges_values(128)
    engine = neural_engines.ActionValueEngine(values, neural_engines.wrap_predict_fn(predictor, params, batch_size=1))
    boards = random_positions(positions, seed)
    engine.play(boards[0].copy())  # compile
    print("ready", flush=True)
    for line in sys.stdin:
        command, *span = line.split()
        if command == "quit":
            break
        chosen = boards[int(span[0]) : int(span[1])]
        if command == "play":
            start = time.process_time()
            moves = [engine.play(board).uci() for board in chosen]
            print(json.dumps([time.process_time() - start, moves]), flush=True)
        else:
            print(json.dumps([np.inner(np.exp(engine.analyse(b)["log_probs"]), values).tolist() for b in chosen]), flush=True)


class OfficialEngine:
    def __init__(self, repo: str, positions: int, seed: int, workdir: str):
        self.params = os.path.join(workdir, "official_params.npz")
        self.child = subprocess.Popen(
            [sys.executable, __file__, "--official-worker", repo, "--positions", str(positions), "--seed", str(seed),
             "--params-out", self.params], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.child.stdout.readline().strip()
        if ready != "ready":
            raise RuntimeError("the official engine did not start (see its error above)")

    def ask(self, command: str, i: int, j: int):
        self.child.stdin.write(f"{command} {i} {j}\n")
        self.child.stdin.flush()
        return json.loads(self.child.stdout.readline())

    def close(self) -> None:
        self.child.stdin.write("quit\n")
        self.child.stdin.close()
        self.child.wait()


# ----------------------------------------------------------------------------- zoo engines


def full_forward_engine(module):
    """The previous engine: every position's outputs computed, the last one read."""
    engine = module.engine()

    @torch.no_grad()
    def full_forward(chunk: torch.Tensor) -> torch.Tensor:
        return module(chunk)[:, -1]

    engine.predictor = full_forward
    return engine


def agreement(a, b) -> tuple[float, float]:
    """(fraction of positions with the same chosen move, max |win-prob difference|) of two analysis lists."""
    same = np.mean([x.best() == y.best() for x, y in zip(a, b)])
    return float(same), max(float(np.abs(x.win_probs - y.win_probs).max()) for x, y in zip(a, b))


def trained_model_agreement(n: int) -> tuple[float, float] | None:
    """bf16 vs fp32 engines of the bundled, trained chess-small-av on n positions (real move-value margins)."""
    import zoo

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        module = zoo.load("chess-small-av")
    except Exception as error:  # noqa: BLE001 - report and go on: the timing table does not need it
        print(f"(chess-small-av unavailable: {error})")
        return None
    boards = random_positions(n, seed=1)
    return agreement(module.engine().analyse_many(boards), module.engine(precision="bf16").analyse_many(boards))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=8, help="interleaving: each round runs every engine on N/rounds positions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--official", default=os.environ.get("SEARCHLESS_CHESS"), help="a searchless_chess checkout")
    parser.add_argument("--agreement-positions", type=int, default=1000, help="bf16 vs fp32 on the trained chess-small-av (0: skip)")
    parser.add_argument("--official-worker", help=argparse.SUPPRESS)
    parser.add_argument("--params-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.official_worker:
        return official_worker(args.official_worker, args.positions, args.seed, args.params_out)

    from zoo.chess.convert import haiku_to_state_dict, read_npz
    from zoo.chess.module import ChessTransformerModule
    from zoo.registry import get_entry

    os.sched_setaffinity(0, {CPU})
    torch.set_num_threads(1)
    torch.manual_seed(0)
    arch = get_entry("chess-9m").architecture
    module = ChessTransformerModule(**{k: arch[k] for k in ("policy", "num_layers", "embedding_dim", "num_heads")}).eval()
    boards = random_positions(args.positions, args.seed)
    n_moves = sum(b.legal_moves.count() for b in boards)

    official, workdir = None, tempfile.mkdtemp(prefix="bench_chess_")
    if args.official:
        try:
            official = OfficialEngine(args.official, args.positions, args.seed, workdir)
            module.model.load_state_dict(haiku_to_state_dict(read_npz(official.params), 8))
        except Exception as error:  # noqa: BLE001 - fall back to the zoo's old path as the baseline
            print(f"(official engine unavailable: {error})")
            official = None

    engines = {"zoo old (full forward)": full_forward_engine(module), "zoo fp32 (default)": module.engine(),
               "zoo bf16 (opt-in)": module.engine(precision="bf16")}
    for engine in engines.values():
        engine.analyse(boards[0])  # warm-up: weight packing, oneDNN kernels
    seconds = {name: 0.0 for name in (["official (JAX, batch 1)"] if official else []) + list(engines)}
    analyses = {name: [] for name in engines}
    official_moves = []
    per_round = -(-len(boards) // args.rounds)
    for i in range(0, len(boards), per_round):
        j = min(i + per_round, len(boards))
        if official:
            cpu, moves = official.ask("play", i, j)
            seconds["official (JAX, batch 1)"] += cpu
            official_moves += moves
        for name, engine in engines.items():
            start = time.process_time()
            for board in boards[i:j]:
                analysis = engine.analyse(board)
                engine.choose(analysis)
                analyses[name].append(analysis)
            seconds[name] += time.process_time() - start

    baseline = "official (JAX, batch 1)" if official else "zoo old (full forward)"
    print(f"\nChessBench 9M action-value ({module.model.num_params():,} params), CPU {CPU} only, torch {torch.__version__}, "
          f"1 thread; {len(boards)} positions / {n_moves} legal moves, {args.rounds} interleaved rounds\n")
    print(f"{'engine':<26}{'positions/CPU-s':>16}{'moves/CPU-s':>13}{'vs ' + baseline.split(' (')[0]:>16}")
    for name, cpu in seconds.items():
        print(f"{name:<26}{len(boards) / cpu:>16.2f}{n_moves / cpu:>13.1f}{seconds[baseline] / cpu:>15.2f}x")
    if not official:
        old = len(boards) / seconds["zoo old (full forward)"]
        print(f"\nofficial engine not run here (see --official); earlier measurement on this machine: {EARLIER_OFFICIAL} "
              f"positions/CPU-s -> fp32 {len(boards) / seconds['zoo fp32 (default)'] / EARLIER_OFFICIAL:.2f}x, "
              f"bf16 {len(boards) / seconds['zoo bf16 (opt-in)'] / EARLIER_OFFICIAL:.2f}x, old {old / EARLIER_OFFICIAL:.2f}x")

    exact = analyses["zoo fp32 (default)"]
    same_old, diff_old = agreement(exact, analyses["zoo old (full forward)"])
    print(f"\nfp32 vs old path: same move {same_old:.1%}, max |win-prob diff| {diff_old:.1e}")
    if official:
        checked = min(8, len(boards))
        official_probs = official.ask("probs", 0, checked)
        diff = max(float(np.abs(np.array(p) - a.win_probs).max()) for p, a in zip(official_probs, exact))
        same = np.mean([m == a.best().uci() for m, a in zip(official_moves, exact)])
        print(f"fp32 vs official (same weights): same move {same:.1%} of {len(boards)}, "
              f"max |win-prob diff| {diff:.1e} on {checked} positions")
        official.close()
    same_bf16, diff_bf16 = agreement(exact, analyses["zoo bf16 (opt-in)"])
    print(f"bf16 vs fp32, 9M random weights: same move {same_bf16:.1%} of {len(boards)}, max |win-prob diff| {diff_bf16:.1e}")
    if args.agreement_positions:
        result = trained_model_agreement(args.agreement_positions)
        if result:
            print(f"bf16 vs fp32, trained chess-small-av: same move {result[0]:.1%} of {args.agreement_positions} "
                  f"positions, max |win-prob diff| {result[1]:.1e}")


if __name__ == "__main__":
    main()
