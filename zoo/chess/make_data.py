"""``zoo chess make-data``: a mini-ChessBench annotated by Stockfish, in the official ``.bag`` format.

Games start with a weighted walk through a polyglot opening book (Debian ``gnuchess-book``) and continue by Stockfish
self-play mixed with random moves. Every position reached is annotated with
  * action values: for every legal move, a root-move search at a fixed depth -> win prob of (s, a);
  * a state value and the best move: a full search at the same depth.
Win probs are the Lichess formula of the side to move (mates: 1 / 0). Each finished game is stored as a small JSON
file, so an interrupted run resumes where it stopped; the final step de-duplicates positions (board, side, castling,
en passant), splits them into train/test *by game* (test positions leave train), writes ``<split>/<policy>_data.bag``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import multiprocessing
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import chess
import chess.engine
import chess.polyglot

from zoo._cli import option
from zoo.io import write_json_atomic
from zoo.chess.bag import POLICIES, BagWriter, encode_record
from zoo.chess.tokenizer import mate_win_probability, win_probability

__all__ = ["DataConfig", "make_data", "score_to_win_prob", "default_book", "play_book", "DEFAULT_STOCKFISH"]

DEFAULT_STOCKFISH = "/usr/games/stockfish"
_BOOK_CANDIDATES = ("/usr/share/games/gnuchess/book.bin", "/usr/share/gnuchess/book.bin", "/usr/local/share/gnuchess/book.bin")


def default_book() -> str | None:
    """The Debian gnuchess-book polyglot book, if installed."""
    return next((p for p in _BOOK_CANDIDATES if os.path.exists(p)), None)


def play_book(board: chess.Board, book: str, plies: int, rng: random.Random) -> None:
    """Push up to ``plies`` weighted random moves of the polyglot ``book`` onto ``board`` (fewer once out of book)."""
    with chess.polyglot.open_reader(book) as reader:
        for _ in range(plies):
            try:
                board.push(reader.weighted_choice(board, random=rng).move)
            except IndexError:  # out of book
                break


def score_to_win_prob(score: chess.engine.PovScore, turn: chess.Color) -> float:
    """Win probability for ``turn`` from a Stockfish score (Lichess formula; mate for ``turn`` -> 1, mated -> 0)."""
    pov = score.pov(turn)
    mate = pov.mate()
    return mate_win_probability(mate) if mate is not None else win_probability(pov.score())


@dataclass
class DataConfig:
    """What ``make_data`` builds; each field is also a ``zoo chess make-data`` option, with this help."""

    num_games: int = option(100, "games to play and annotate")
    depth: int = option(8, "Stockfish depth of the annotations")
    selfplay_depth: int = option(4, "Stockfish depth of the moves that continue a game")
    random_move_prob: float = option(0.2, "chance that a self-play move is random")
    max_book_plies: int = option(12, "each game follows the book for 0..this many plies")
    max_plies: int = option(160, "a game stops after this many plies")
    test_fraction: float = option(0.1, "share of the games in the test split")
    seed: int = option(0, "random seed")
    book: str | None = option(None, "polyglot book (default: Debian gnuchess-book; 'none' for none)")
    stockfish: str = option(DEFAULT_STOCKFISH, "Stockfish binary")
    hash_mb: int = option(16, "Stockfish hash table per worker, MiB")

    def __post_init__(self) -> None:
        if self.num_games < 1 or self.depth < 1 or self.selfplay_depth < 1:
            raise ValueError("num_games, depth and selfplay_depth must be >= 1")
        if not 0 <= self.random_move_prob <= 1 or not 0 <= self.test_fraction < 1:
            raise ValueError("random_move_prob must lie in [0, 1] and test_fraction in [0, 1)")
        if not (os.path.isfile(self.stockfish) or shutil.which(self.stockfish)):
            raise FileNotFoundError(f"Stockfish not found at {self.stockfish!r}: apt-get install stockfish, or pass --stockfish PATH")
        if self.book is not None and not os.path.isfile(self.book):
            raise FileNotFoundError(f"opening book {self.book!r} not found: apt-get install gnuchess-book, or pass --book PATH")

    def split_of(self, game: int) -> str:
        return "test" if random.Random(f"split-{self.seed}-{game}").random() < self.test_fraction else "train"


# ----------------------------------------------------------------------------- one game (worker)
def _annotate(engine: chess.engine.SimpleEngine, board: chess.Board, depth: int) -> dict:
    limit = chess.engine.Limit(depth=depth)
    action_values = {}
    for move in board.legal_moves:
        info = engine.analyse(board, limit, root_moves=[move])
        action_values[move.uci()] = score_to_win_prob(info["score"], board.turn)
    info = engine.analyse(board, limit)
    return {"fen": board.fen(), "action_values": action_values,
            "state_value": score_to_win_prob(info["score"], board.turn), "best_move": info["pv"][0].uci()}


def _play_game(cfg: DataConfig, games_dir: Path, game: int) -> int:
    """Play and annotate game ``game`` into ``games_dir``; returns its number of positions."""
    rng = random.Random(f"game-{cfg.seed}-{game}")
    board = chess.Board()
    positions = []
    with chess.engine.SimpleEngine.popen_uci(cfg.stockfish) as engine:
        engine.configure({"Threads": 1, "Hash": cfg.hash_mb})
        if cfg.book:
            play_book(board, cfg.book, rng.randint(0, cfg.max_book_plies), rng)
        while not board.is_game_over(claim_draw=True) and len(board.move_stack) < cfg.max_plies:
            positions.append(_annotate(engine, board, cfg.depth))
            if rng.random() < cfg.random_move_prob:
                move = rng.choice(sorted(board.legal_moves, key=lambda m: m.uci()))
            else:
                move = engine.play(board, chess.engine.Limit(depth=cfg.selfplay_depth)).move
            board.push(move)
    result = {"game": game, "split": cfg.split_of(game), "moves": [m.uci() for m in board.move_stack],
              "positions": positions}
    write_json_atomic(games_dir / f"game_{game:06d}.json", result)
    return len(positions)


# ----------------------------------------------------------------------------- driver
def _position_key(fen: str) -> str:
    return " ".join(fen.split(" ")[:4])  # the position without its move counters


def _finalize(cfg: DataConfig, out_dir: Path, games_dir: Path) -> dict:
    splits: dict[str, list[dict]] = {"train": [], "test": []}
    seen: dict[str, set] = {"train": set(), "test": set()}
    for game in range(cfg.num_games):
        result = json.loads((games_dir / f"game_{game:06d}.json").read_text())
        for pos in result["positions"]:
            key = _position_key(pos["fen"])
            if key not in seen[result["split"]]:
                seen[result["split"]].add(key)
                splits[result["split"]].append(pos)
    splits["train"] = [p for p in splits["train"] if _position_key(p["fen"]) not in seen["test"]]
    counts = {}
    for split, positions in splits.items():
        with contextlib.ExitStack() as bags:  # a failed write leaves no partial bag
            writers = {kind: bags.enter_context(BagWriter(out_dir / split / f"{kind}_data.bag")) for kind in POLICIES}
            n_actions = 0
            for pos in positions:
                for move, value in pos["action_values"].items():
                    writers["action_value"].write(encode_record("action_value", pos["fen"], move, value))
                    n_actions += 1
                writers["state_value"].write(encode_record("state_value", pos["fen"], pos["state_value"]))
                writers["behavioral_cloning"].write(encode_record("behavioral_cloning", pos["fen"], pos["best_move"]))
        counts[split] = {"positions": len(positions), "action_values": n_actions}
    info = {"config": asdict(cfg), "counts": counts}
    write_json_atomic(out_dir / "info.json", info)
    return info


def make_data(out_dir: str | os.PathLike, cfg: DataConfig, *, workers: int | None = None, progress: bool = True) -> dict:
    """Generate (or resume generating) a dataset into ``out_dir``; returns the counts written."""
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    games_dir = out_dir / "games"
    games_dir.mkdir(parents=True, exist_ok=True)
    settings = out_dir / "make_data.json"
    wanted = {k: v for k, v in asdict(cfg).items() if k != "num_games"}
    if settings.exists():
        previous = json.loads(settings.read_text())
        if previous != wanted:
            changed = sorted(k for k in wanted if previous.get(k) != wanted[k])
            raise ValueError(f"{out_dir} was started with other settings ({', '.join(changed)}); resume with the same settings or use a new folder")
    else:
        write_json_atomic(settings, wanted)

    todo = [g for g in range(cfg.num_games) if not (games_dir / f"game_{g:06d}.json").exists()]
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    bar = tqdm(total=cfg.num_games, initial=cfg.num_games - len(todo), desc="games", unit="game", disable=not progress)
    positions = 0
    play = functools.partial(_play_game, cfg, games_dir)
    with multiprocessing.get_context("spawn").Pool(workers) if workers > 1 else contextlib.nullcontext() as pool:
        for n in pool.imap_unordered(play, todo) if pool else map(play, todo):
            positions += n
            bar.update(1)
            bar.set_postfix(positions=positions)
    bar.close()
    return _finalize(cfg, out_dir, games_dir)
