"""``zoo chess ...`` sub-commands and ``zoo convert chess``. Heavy imports happen inside the commands."""

from __future__ import annotations

import sys

from zoo._cli import add_dataclass_arguments, add_model_argument, from_args, load_model, print_json

__all__ = ["register_cli"]


def _engine(args):
    import torch

    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    model = load_model(args)
    return model.engine(temperature=getattr(args, "temperature", None), batch_size=getattr(args, "batch_size", 2048),
                        precision=args.precision)


# ----------------------------------------------------------------------------- commands


def cmd_make_data(args) -> None:
    from zoo.chess.make_data import DataConfig, default_book, make_data

    cfg = from_args(DataConfig, args, book=None if args.book == "none" else (args.book or default_book()))
    counts = make_data(args.out, cfg, workers=args.workers)["counts"]
    print_json(counts)
    for split, count in counts.items():
        if not count["positions"]:
            print(f"warning: no game went to the {split} split ({cfg.num_games} games, --test-fraction "
                  f"{cfg.test_fraction}), and training needs both: rerun with more --games (the games made are kept)",
                  file=sys.stderr)


def cmd_eval(args) -> None:
    from zoo.chess.evaluate import static_metrics

    averages, per_fen = static_metrics(_engine(args), args.test_bag, max_fens=args.max_fens, progress=True)
    print_json({"averages": averages, "per_fen": per_fen} if args.per_fen else averages, args.json)


def cmd_puzzles(args) -> None:
    from zoo.chess.evaluate import puzzle_accuracy

    engine = _engine(args)
    report = {}
    for path in args.files:
        result = puzzle_accuracy(engine, path, limit=args.limit, progress=True)
        report[path] = result if args.per_puzzle else {k: v for k, v in result.items() if k != "puzzles"}
    print_json(report, args.json)


def cmd_match(args) -> None:
    from zoo.chess.evaluate import ADJUDICATION_TIME, MaterialGreedy, RandomMover, play_match
    from zoo.chess.make_data import default_book

    opponent = {"random": RandomMover, "greedy": MaterialGreedy}.get(args.opponent)
    if args.no_adjudication:
        adjudication = None
    else:  # an explicit --adjudication-time 0 stays 0
        adjudication = ADJUDICATION_TIME if args.adjudication_time is None else args.adjudication_time
    result = play_match(
        _engine(args), opponent(args.seed) if opponent else None, games=args.games, stockfish=args.stockfish, skill_level=args.skill, nodes=args.nodes, depth=args.depth,
        book=None if args.book == "none" else (args.book or default_book()), opening_plies=args.opening_plies,
        max_plies=args.max_plies, adjudication_time=adjudication,
        seed=args.seed, pgn_path=args.pgn, name=args.name, progress=True,
    )
    print_json({**result.summary(), "adjudication_time": adjudication, "max_plies": args.max_plies}, args.json)


def cmd_uci(args) -> None:
    from zoo.chess.uci import run_uci

    run_uci(args.name, device=args.device, temperature=args.temperature, threads=args.threads,
            precision=args.precision)


def cmd_play(args) -> None:
    import chess

    from zoo.chess.uci import play_terminal

    play_terminal(_engine(args), human=chess.WHITE if args.color == "white" else chess.BLACK, fen=args.fen)


def cmd_board(args) -> None:
    import chess

    from zoo.io import write_text_atomic
    from zoo.chess.engine import board_svg

    board = chess.Board(args.fen)
    analysis = _engine(args).analyse(board)
    write_text_atomic(args.out, board_svg(board, analysis, top=args.top))
    best = analysis.best()
    print(f"{args.out}: best {board.san(best)} ({best.uci()})")


def cmd_convert(args) -> None:
    from zoo.chess.convert import convert

    module = convert(args.src, args.out, policy=args.policy, num_heads=args.num_heads, step=args.step, ema=args.ema)
    cfg = module.cfg
    print(f"{args.out}: {cfg.policy}, {cfg.num_layers} layers, width {cfg.embedding_dim}, {module.model.num_params():,} parameters")


# ----------------------------------------------------------------------------- parsers


def _make_data_arguments(p) -> None:
    from zoo.chess.make_data import DataConfig  # python-chess: imported only when make-data runs

    p.add_argument("out", help="output folder (train/ and test/ bags; games/ holds resumable per-game results)")
    add_dataclass_arguments(p, DataConfig, flags={"num_games": "--games"})
    p.add_argument("--workers", type=int, help="processes (default: all cores)")


def _model_args(p, temperature: bool = True, threads: str = "torch CPU threads (default: torch's)") -> None:
    add_model_argument(p, "catalog name (e.g. chess-9m) or a zoo repo folder", dtype=None)
    p.add_argument("--threads", type=int, help=threads)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: about 2x faster on CPU, choosing the fp32 move in 99%% of positions (measured on 1,000; see the README)")
    if temperature:
        p.add_argument("--temperature", type=float, help="sample moves with this temperature (default: greedy)")


def register_cli(commands, convert) -> None:
    chess_cmd = commands.add_parser("chess", help="ChessBench transformer: data, evaluation, UCI engine, play")
    sub = chess_cmd.add_subparsers(dest="chess_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("make-data", help="build a mini-ChessBench with Stockfish (resumable)",
                       arguments=_make_data_arguments)
    p.set_defaults(func=cmd_make_data)

    p = sub.add_parser("eval", help="official static metrics on an action-value test bag")
    _model_args(p, temperature=False)
    p.add_argument("--test-bag", required=True, help="e.g. test/action_value_data.bag")
    p.add_argument("--max-fens", type=int, help="evaluate only the first this many positions (default: all)")
    p.add_argument("--batch-size", type=int, default=2048, help="positions per forward pass")
    p.add_argument("--per-fen", action="store_true", help="also print per-position metrics")
    p.add_argument("--json", help="also write the result to this file")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("puzzles", help="puzzle accuracy on Lichess CSVs or mate-in-N PGNs")
    _model_args(p, temperature=False)
    p.add_argument("files", nargs="+", help="puzzles.csv (PGN, Moves, Rating) or problem .pgn files")
    p.add_argument("--limit", type=int, help="solve only the first this many puzzles of each file (default: all)")
    p.add_argument("--per-puzzle", action="store_true", help="also print each puzzle's result")
    p.add_argument("--json", help="also write the result to this file")
    p.set_defaults(func=cmd_puzzles)

    p = sub.add_parser("match", help="play Stockfish (or a random / material-greedy mover); write PGN; report score and Elo")
    _model_args(p)
    p.add_argument("--opponent", choices=("stockfish", "random", "greedy"), default="stockfish",
                   help="Stockfish, a random mover or a material-greedy one-ply player")
    p.add_argument("--games", type=int, default=10, help="games, alternating colours")
    p.add_argument("--skill", type=int, default=0, help="Stockfish Skill Level (0-20)")
    p.add_argument("--nodes", type=int, default=1000, help="Stockfish node limit per move")
    p.add_argument("--depth", type=int, help="Stockfish depth limit per move (default: none, --nodes only)")
    p.add_argument("--book", help="polyglot book for the openings (default: gnuchess-book; 'none' for none)")
    p.add_argument("--opening-plies", type=int, default=6, help="book plies before the players take over")
    p.add_argument("--max-plies", type=int, default=400, help="a game still running after this many plies is a draw")
    p.add_argument("--adjudication-time", type=float,
                   help="seconds of full-strength Stockfish per position to adjudicate a win at > 1300 cp or a mate "
                        "(default: the official 0.01)")
    p.add_argument("--no-adjudication", action="store_true", help="play every game out (checkmate, draw or --max-plies)")
    p.add_argument("--seed", type=int, default=0, help="random seed (openings, random mover)")
    p.add_argument("--stockfish", default="/usr/games/stockfish", help="Stockfish binary")
    p.add_argument("--pgn", help="write the games here")
    p.add_argument("--json", help="also write the result to this file")
    p.set_defaults(func=cmd_match)

    p = sub.add_parser("uci", help="run the model as a UCI engine on stdin/stdout")
    _model_args(p, threads="torch CPU threads, the UCI option Threads (default: the usable cores)")
    p.set_defaults(func=cmd_uci)

    p = sub.add_parser("play", help="play the model in the terminal")
    _model_args(p)
    p.add_argument("--color", choices=("white", "black"), default="white", help="your colour")
    p.add_argument("--fen", help="start position")
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("board", help="SVG of a position annotated with the model's move values")
    _model_args(p, temperature=False)
    p.add_argument("--fen", default="rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", help="position")
    p.add_argument("--out", default="board.svg", help="SVG file to write")
    p.add_argument("--top", type=int, default=5, help="arrows for this many best moves")
    p.set_defaults(func=cmd_board)

    p = convert.add_parser("chess", help="official searchless_chess checkpoint (Orbax folder/zip or params .npz) -> zoo repo")
    p.add_argument("src", help="a params .npz, an Orbax checkpoint folder (<dir>/<step>/params) or an official .zip")
    p.add_argument("--out", required=True, help="output zoo repo folder")
    p.add_argument("--policy", choices=("action_value", "state_value", "behavioral_cloning"),
                   help="required for a 128-way value head (AV and SV checkpoints look alike; official 9M_state_value "
                        "is state_value, 9M/136M/270M action_value); a 1968-way head is behavioral_cloning")
    p.add_argument("--num-heads", type=int,
                   help="attention heads; required: not stored in the checkpoint (official 9M/136M/270M, SV and BC: 8)")
    p.add_argument("--step", type=int, help="checkpoint step (default: the largest)")
    p.add_argument("--ema", action="store_true", help="convert params_ema instead of params")
    p.set_defaults(func=cmd_convert)

