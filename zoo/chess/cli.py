"""``zoo chess ...`` sub-commands and ``zoo convert chess``. Heavy imports happen inside the commands."""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Literal

from zoo._cli import arg, command, commands, from_args, load_model, option, options, print_json

__all__ = ["register_cli"]


@options
class EngineOptions:
    name: str = arg("catalog name (e.g. chess-9m) or a zoo repo folder")
    device: str = option("cpu", "torch device")
    threads: int | None = option(None, "torch CPU threads (default: torch's)")
    precision: Literal["fp32", "bf16"] = option("fp32", "bf16: about 2x faster on CPU, choosing the fp32 move in 99%% "
                                                "of positions (measured on 1,000; see the README)")


@options
class SampledOptions(EngineOptions):
    temperature: float | None = option(None, "sample moves with this temperature (default: greedy)")


def _engine(o: EngineOptions, batch_size: int = 2048):
    import torch

    if o.threads:
        torch.set_num_threads(o.threads)
    return load_model(o).engine(temperature=getattr(o, "temperature", None), batch_size=batch_size,
                                precision=o.precision)


def _book(path: str | None) -> str | None:
    """The --book option: a polyglot book, 'none' or, when not given, Debian's gnuchess-book."""
    from zoo.chess.make_data import default_book

    return None if path == "none" else (path or default_book())


@options
class MakeDataOptions:  # and every field of zoo.chess.make_data.DataConfig (see _make_data_options)
    out: str = arg("output folder (train/ and test/ bags; games/ holds resumable per-game results)")
    workers: int | None = option(None, "processes (default: all cores)")


def _make_data_options() -> type:
    from zoo.chess.make_data import DataConfig  # python-chess: imported only when make-data runs

    hints = typing.get_type_hints(DataConfig)
    config = [(f.name, hints[f.name], dataclasses.field(default=f.default, metadata=f.metadata))
              for f in dataclasses.fields(DataConfig)]
    return dataclasses.make_dataclass("MakeDataConfigOptions", config, bases=(MakeDataOptions,), kw_only=True)


def cmd_make_data(o) -> None:
    from zoo.chess.make_data import DataConfig, make_data

    cfg = from_args(DataConfig, o, book=_book(o.book))
    counts = make_data(o.out, cfg, workers=o.workers)["counts"]
    print_json(counts)
    for split, count in counts.items():
        if not count["positions"]:
            print(f"warning: no game went to the {split} split ({cfg.num_games} games, --test-fraction "
                  f"{cfg.test_fraction}), and training needs both: rerun with more --games (the games made are kept)",
                  file=sys.stderr)


@options
class EvalOptions(EngineOptions):
    test_bag: str = option(help="e.g. test/action_value_data.bag")
    max_fens: int | None = option(None, "evaluate only the first this many positions (default: all)")
    batch_size: int = option(2048, "positions per forward pass")
    per_fen: bool = option(False, "also print per-position metrics")
    json: str | None = option(None, "also write the result to this file")


def cmd_eval(o: EvalOptions) -> None:
    from zoo.chess.evaluate import static_metrics

    averages, per_fen = static_metrics(_engine(o, o.batch_size), o.test_bag, max_fens=o.max_fens, progress=True)
    print_json({"averages": averages, "per_fen": per_fen} if o.per_fen else averages, o.json)


@options
class PuzzlesOptions(EngineOptions):
    files: list[str] = arg("puzzles.csv (PGN, Moves, Rating) or problem .pgn files")
    limit: int | None = option(None, "solve only the first this many puzzles of each file (default: all)")
    per_puzzle: bool = option(False, "also print each puzzle's result")
    json: str | None = option(None, "also write the result to this file")


def cmd_puzzles(o: PuzzlesOptions) -> None:
    from zoo.chess.evaluate import puzzle_accuracy

    engine = _engine(o)
    report = {}
    for path in o.files:
        result = puzzle_accuracy(engine, path, limit=o.limit, progress=True)
        report[path] = result if o.per_puzzle else {k: v for k, v in result.items() if k != "puzzles"}
    print_json(report, o.json)


@options
class MatchOptions(SampledOptions):
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


def cmd_match(o: MatchOptions) -> None:
    from zoo.chess.evaluate import ADJUDICATION_TIME, MaterialGreedy, RandomMover, play_match

    opponent = {"random": RandomMover, "greedy": MaterialGreedy}.get(o.opponent)
    if o.no_adjudication:
        adjudication = None
    else:  # an explicit --adjudication-time 0 stays 0
        adjudication = ADJUDICATION_TIME if o.adjudication_time is None else o.adjudication_time
    result = play_match(
        _engine(o), opponent(o.seed) if opponent else None, games=o.games, stockfish=o.stockfish, skill_level=o.skill,
        nodes=o.nodes, depth=o.depth, book=_book(o.book), opening_plies=o.opening_plies, max_plies=o.max_plies,
        adjudication_time=adjudication, seed=o.seed, pgn_path=o.pgn, name=o.name, progress=True,
    )
    print_json({**result.summary(), "adjudication_time": adjudication, "max_plies": o.max_plies}, o.json)


@options
class UCIOptions(SampledOptions):
    threads: int | None = option(None, "torch CPU threads, the UCI option Threads (default: the usable cores)")


def cmd_uci(o: UCIOptions) -> None:
    from zoo.chess.uci import run_uci

    run_uci(o.name, device=o.device, temperature=o.temperature, threads=o.threads, precision=o.precision)


@options
class PlayOptions(SampledOptions):
    color: Literal["white", "black"] = option("white", "your colour")
    fen: str | None = option(None, "start position")


def cmd_play(o: PlayOptions) -> None:
    import chess

    from zoo.chess.uci import play_terminal

    play_terminal(_engine(o), human=chess.WHITE if o.color == "white" else chess.BLACK, fen=o.fen)


@options
class BoardOptions(EngineOptions):
    fen: str = option("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "position")
    out: str = option("board.svg", "SVG file to write")
    top: int = option(5, "arrows for this many best moves")


def cmd_board(o: BoardOptions) -> None:
    import chess

    from zoo.chess.engine import board_svg
    from zoo.io import write_text_atomic

    board = chess.Board(o.fen)
    analysis = _engine(o).analyse(board)
    write_text_atomic(o.out, board_svg(board, analysis, top=o.top))
    best = analysis.best()
    print(f"{o.out}: best {board.san(best)} ({best.uci()})")


@options
class ConvertOptions:
    src: str = arg("a params .npz, an Orbax checkpoint folder (<dir>/<step>/params) or an official .zip")
    out: str = option(help="output zoo repo folder")
    policy: Literal["action_value", "state_value", "behavioral_cloning"] | None = option(
        None, "required for a 128-way value head (AV and SV checkpoints look alike; official 9M_state_value is "
        "state_value, 9M/136M/270M action_value); a 1968-way head is behavioral_cloning")
    num_heads: int | None = option(None, "attention heads; required: not stored in the checkpoint (official "
                                   "9M/136M/270M, SV and BC: 8)")
    step: int | None = option(None, "checkpoint step (default: the largest)")
    ema: bool = option(False, "convert params_ema instead of params")


def cmd_convert(o: ConvertOptions) -> None:
    from zoo.chess.convert import convert

    module = convert(o.src, o.out, policy=o.policy, num_heads=o.num_heads, step=o.step, ema=o.ema)
    cfg = module.cfg
    print(f"{o.out}: {cfg.policy}, {cfg.num_layers} layers, width {cfg.embedding_dim}, "
          f"{module.model.num_params():,} parameters")


def register_cli(parent, convert) -> None:
    sub = commands(parent, "chess", "ChessBench transformer: data, evaluation, UCI engine, play", "SUBCOMMAND")
    command(sub, "make-data", cmd_make_data, "build a mini-ChessBench with Stockfish (resumable)", _make_data_options,
            flags={"num_games": "--games"})
    command(sub, "eval", cmd_eval, "official static metrics on an action-value test bag")
    command(sub, "puzzles", cmd_puzzles, "puzzle accuracy on Lichess CSVs or mate-in-N PGNs")
    command(sub, "match", cmd_match, "play Stockfish (or a random / material-greedy mover); write PGN; report score "
            "and Elo")
    command(sub, "uci", cmd_uci, "run the model as a UCI engine on stdin/stdout")
    command(sub, "play", cmd_play, "play the model in the terminal")
    command(sub, "board", cmd_board, "SVG of a position annotated with the model's move values")
    command(convert, "chess", cmd_convert, "official searchless_chess checkpoint (Orbax folder/zip or params .npz) -> "
            "zoo repo")
