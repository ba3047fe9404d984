"""``zoo chess ...`` sub-commands and ``zoo convert chess``. Heavy imports happen inside the commands."""

from __future__ import annotations

import sys
from typing import Literal

from zoo._cli import Commands, Options, arg, from_args, load_model, option, print_json

chess = Commands("chess", "ChessBench transformer: data, evaluation, UCI engine, play", "SUBCOMMAND")
register_cli = chess.register_cli


def _book(path: str | None) -> str | None:
    """The --book option: a polyglot book, 'none' or, when not given, Debian's gnuchess-book."""
    from zoo.chess.make_data import default_book

    return None if path == "none" else (path or default_book())


@chess.command("make-data", "build a mini-ChessBench with Stockfish (resumable)",
               fields_of="zoo.chess.make_data:DataConfig", flags={"num_games": "--games"})
class MakeData(Options):  # and DataConfig's fields (python-chess: imported only when make-data runs)
    out: str = arg("output folder (train/ and test/ bags; games/ holds resumable per-game results)")
    workers: int | None = option(None, "processes (default: all cores)")

    def run(self) -> None:
        from zoo.chess.make_data import DataConfig, make_data

        cfg = from_args(DataConfig, self, book=_book(self.book))
        counts = make_data(self.out, cfg, workers=self.workers)["counts"]
        print_json(counts)
        for split, count in counts.items():
            if not count["positions"]:
                print(f"warning: no game went to the {split} split ({cfg.num_games} games, --test-fraction "
                      f"{cfg.test_fraction}), and training needs both: rerun with more --games (the games made are "
                      "kept)", file=sys.stderr)


class Engine(Options):
    name: str = arg("catalog name (e.g. chess-9m) or a zoo repo folder")
    device: str = option("cpu", "torch device")
    threads: int | None = option(None, "torch CPU threads (default: torch's)")
    precision: Literal["fp32", "bf16"] = option("fp32", "bf16: about 2x faster on CPU, choosing the fp32 move in 99%% "
                                                "of positions (measured on 1,000; see the README)")

    def engine(self, batch_size: int = 2048):
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        return load_model(self).engine(temperature=getattr(self, "temperature", None), batch_size=batch_size,
                                       precision=self.precision)


class SampledEngine(Engine):
    temperature: float | None = option(None, "sample moves with this temperature (default: greedy)")


@chess.command("eval", "official static metrics on an action-value test bag")
class Eval(Engine):
    test_bag: str = option(help="e.g. test/action_value_data.bag")
    max_fens: int | None = option(None, "evaluate only the first this many positions (default: all)")
    batch_size: int = option(2048, "positions per forward pass")
    per_fen: bool = option(False, "also print per-position metrics")
    json: str | None = option(None, "also write the result to this file")

    def run(self) -> None:
        from zoo.chess.evaluate import static_metrics

        averages, per_fen = static_metrics(self.engine(self.batch_size), self.test_bag, max_fens=self.max_fens,
                                           progress=True)
        print_json({"averages": averages, "per_fen": per_fen} if self.per_fen else averages, self.json)


@chess.command("puzzles", "puzzle accuracy on Lichess CSVs or mate-in-N PGNs")
class Puzzles(Engine):
    files: list[str] = arg("puzzles.csv (PGN, Moves, Rating) or problem .pgn files")
    limit: int | None = option(None, "solve only the first this many puzzles of each file (default: all)")
    per_puzzle: bool = option(False, "also print each puzzle's result")
    json: str | None = option(None, "also write the result to this file")

    def run(self) -> None:
        from zoo.chess.evaluate import puzzle_accuracy

        engine, report = self.engine(), {}
        for path in self.files:
            result = puzzle_accuracy(engine, path, limit=self.limit, progress=True)
            report[path] = result if self.per_puzzle else {k: v for k, v in result.items() if k != "puzzles"}
        print_json(report, self.json)


@chess.command("match", "play Stockfish (or a random / material-greedy mover); write PGN; report score and Elo")
class Match(SampledEngine):
    opponent: Literal["stockfish", "random", "greedy"] = option(
        "stockfish", "Stockfish, a random mover or a material-greedy one-ply player")
    games: int = option(10, "games, alternating colours")
    skill: int = option(0, "Stockfish Skill Level (0-20)")
    nodes: int = option(1000, "Stockfish node limit per move")
    depth: int | None = option(None, "Stockfish depth limit per move (default: none, --nodes only)")
    book: str | None = option(None, "polyglot book for the openings (default: gnuchess-book; 'none' for none)")
    opening_plies: int = option(6, "book plies before the players take over")
    max_plies: int = option(400, "a game still running after this many plies is a draw")
    adjudication_time: float | None = option(None, "seconds of full-strength Stockfish per position to adjudicate a "
                                             "win at > 1300 cp or a mate (default: the official 0.01)")
    no_adjudication: bool = option(False, "play every game out (checkmate, draw or --max-plies)")
    seed: int = option(0, "random seed (openings, random mover)")
    stockfish: str = option("/usr/games/stockfish", "Stockfish binary")
    pgn: str | None = option(None, "write the games here")
    json: str | None = option(None, "also write the result to this file")

    def run(self) -> None:
        from zoo.chess.evaluate import ADJUDICATION_TIME, MaterialGreedy, RandomMover, play_match

        opponent = {"random": RandomMover, "greedy": MaterialGreedy}.get(self.opponent)
        adjudication = None if self.no_adjudication else (  # an explicit --adjudication-time 0 stays 0
            ADJUDICATION_TIME if self.adjudication_time is None else self.adjudication_time)
        result = play_match(
            self.engine(), opponent(self.seed) if opponent else None, games=self.games, stockfish=self.stockfish,
            skill_level=self.skill, nodes=self.nodes, depth=self.depth, book=_book(self.book),
            opening_plies=self.opening_plies, max_plies=self.max_plies, adjudication_time=adjudication, seed=self.seed,
            pgn_path=self.pgn, name=self.name, progress=True,
        )
        print_json({**result.summary(), "adjudication_time": adjudication, "max_plies": self.max_plies}, self.json)


@chess.command("uci", "run the model as a UCI engine on stdin/stdout")
class UCI(SampledEngine):
    threads: int | None = option(None, "torch CPU threads, the UCI option Threads (default: the usable cores)")

    def run(self) -> None:
        from zoo.chess.uci import run_uci

        run_uci(self.name, device=self.device, temperature=self.temperature, threads=self.threads,
                precision=self.precision)


@chess.command("play", "play the model in the terminal")
class Play(SampledEngine):
    color: Literal["white", "black"] = option("white", "your colour")
    fen: str | None = option(None, "start position")

    def run(self) -> None:
        import chess

        from zoo.chess.uci import play_terminal

        play_terminal(self.engine(), human=chess.WHITE if self.color == "white" else chess.BLACK, fen=self.fen)


@chess.command("board", "SVG of a position annotated with the model's move values")
class Board(Engine):
    fen: str = option("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "position")
    out: str = option("board.svg", "SVG file to write")
    top: int = option(5, "arrows for this many best moves")

    def run(self) -> None:
        import chess

        from zoo.chess.engine import board_svg
        from zoo.io import write_text_atomic

        board = chess.Board(self.fen)
        analysis = self.engine().analyse(board)
        write_text_atomic(self.out, board_svg(board, analysis, top=self.top))
        print(f"{self.out}: best {board.san(best := analysis.best())} ({best.uci()})")


@chess.command(None, "official searchless_chess checkpoint (Orbax folder/zip or params .npz) -> zoo repo")
class Convert(Options):
    src: str = arg("a params .npz, an Orbax checkpoint folder (<dir>/<step>/params) or an official .zip")
    out: str = option(help="output zoo repo folder")
    policy: Literal["action_value", "state_value", "behavioral_cloning"] | None = option(
        None, "required for a 128-way value head (AV and SV checkpoints look alike; official 9M_state_value is "
        "state_value, 9M/136M/270M action_value); a 1968-way head is behavioral_cloning")
    num_heads: int | None = option(None, "attention heads; required: not stored in the checkpoint (official "
                                   "9M/136M/270M, SV and BC: 8)")
    step: int | None = option(None, "checkpoint step (default: the largest)")
    ema: bool = option(False, "convert params_ema instead of params")

    def run(self) -> None:
        from zoo.chess.convert import convert

        module = convert(self.src, self.out, policy=self.policy, num_heads=self.num_heads, step=self.step, ema=self.ema)
        cfg = module.cfg
        print(f"{self.out}: {cfg.policy}, {cfg.num_layers} layers, width {cfg.embedding_dim}, "
              f"{module.model.num_params():,} parameters")
