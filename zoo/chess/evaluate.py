"""Evaluation: the official static metrics, puzzles (Lichess CSV and mate-in-N PGNs), matches vs Stockfish.

    averages, per_fen = static_metrics(engine, "test/action_value_data.bag")
    result = puzzle_accuracy(engine, "puzzles.csv")          # or a mate-in-N .pgn
    match = play_match(engine, games=20, skill_level=5, pgn_path="games.pgn")
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import chess
import chess.engine
import chess.pgn
import numpy as np

from zoo.chess.bag import BagReader, decode_record
from zoo.chess.engine import ChessEngine, legal_moves
from zoo.chess.make_data import DEFAULT_STOCKFISH, play_book
from zoo.chess.tokenizer import ACTION_TO_INDEX, to_bucket

__all__ = ["read_action_value_test_set", "static_metrics", "evaluate_puzzle", "read_puzzles", "puzzle_accuracy",
           "elo_difference", "play_match", "MatchResult", "RandomMover", "MaterialGreedy", "StockfishPlayer"]

_LN2 = math.log(2)


# ----------------------------------------------------------------------------- static metrics
def read_action_value_test_set(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], list[str]]:
    """Group an AV bag by FEN -> float32 array of (action id, win prob) sorted by action id; FENs whose actions are
    not exactly the legal moves are dropped (returned second), as the official evaluator does."""
    grouped: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for raw in BagReader(path):
        fen, move, win_prob = decode_record("action_value", raw)
        grouped[fen].append((ACTION_TO_INDEX[move], win_prob))
    kept, dropped = {}, []
    for fen, pairs in grouped.items():
        table = np.asarray(sorted(pairs), dtype=np.float32)
        legal = [ACTION_TO_INDEX[m.uci()] for m in legal_moves(chess.Board(fen))]
        if table[:, 0].astype(int).tolist() == legal:
            kept[fen] = table
        else:
            dropped.append(fen)
    return kept, dropped


def _fen_metrics(analysis, returns: np.ndarray, num_buckets: int) -> dict:
    """Official per-FEN metrics for one analysed position given Stockfish returns (float32, official order)."""
    from scipy.stats import kendalltau

    w = analysis.win_probs if analysis.policy != "behavioral_cloning" else analysis.scores
    best = int(np.argmax(w))
    out = {"action_accuracy": bool(returns[best] == returns.max())}
    if analysis.policy == "behavioral_cloning":
        p = np.exp(analysis.scores)
        out["output_log_loss"] = float(-analysis.scores[int(np.argmax(returns))] / _LN2)
        out["entropy"] = float(-(p * analysis.scores).sum() / _LN2)
    else:
        log_probs = analysis.log_probs.astype(np.float64)
        targets = to_bucket(returns.astype(np.float64), num_buckets)
        out["output_log_loss"] = float(np.mean(-log_probs[np.arange(len(returns)), targets]) / _LN2)
        out["entropy"] = float(np.mean(-(np.exp(log_probs) * log_probs).sum(-1)) / _LN2)
        out["l2_win_prob_loss"] = float(np.mean((analysis.win_probs - returns) ** 2))
        if analysis.policy == "state_value":
            out["consistency_loss"] = float((analysis.state_win_prob - analysis.win_probs.max()) ** 2)
    if len(returns) == 1:
        out["kendall_tau"] = out["kendall_tau_values"] = 1.0
    else:
        # official quirk: tau-b between the sorting permutations, ties broken by numpy's default argsort
        out["kendall_tau"] = float(kendalltau(np.argsort(w), np.argsort(returns)).statistic)
        out["kendall_tau_values"] = float(kendalltau(w, returns).statistic)  # the standard, value-based tau
    return out


def static_metrics(engine: ChessEngine, test_bag: str | os.PathLike, *, max_fens: int | None = None, progress: bool = False):
    """Official ChessBench static metrics over an action-value test bag: ``(averages, per_fen)``, the averages plain
    means over the retained FENs, keyed ``eval_<metric>``."""
    from tqdm.auto import tqdm

    data, dropped = read_action_value_test_set(test_bag)
    fens = list(data)[:max_fens]
    per_fen = []
    chunk = 64
    for start in tqdm(range(0, len(fens), chunk), desc="positions", unit=f"x{chunk}", disable=not progress):
        batch = fens[start : start + chunk]
        for fen, analysis in zip(batch, engine.analyse_many([chess.Board(f) for f in batch])):
            returns = data[fen][:, 1]
            per_fen.append({"fen": fen, **_fen_metrics(analysis, returns, engine.module.cfg.num_return_buckets)})
    keys = [k for k in per_fen[0] if k != "fen"] if per_fen else []
    # nanmean: the value-based tau is undefined (NaN) where Stockfish gives every move the same value
    averages = {f"eval_{k}": float(np.nanmean([r[k] for r in per_fen])) for k in keys}
    return {**averages, "num_fens": len(per_fen), "num_dropped_fens": len(dropped)}, per_fen


# ----------------------------------------------------------------------------- puzzles
def evaluate_puzzle(engine: ChessEngine, board: chess.Board, moves: list[str], *, engine_first: bool = False) -> tuple[bool, list[str]]:
    """Official puzzle rule on ``board`` (its history kept): the listed opponent moves are played, the engine must
    find every listed move of its side; a different move still solves it if it checkmates. Lichess puzzles start with
    the opponent's move, composed problems (mate-in-N PGNs) with the solver's (``engine_first``). Returns (solved, the
    engine's moves)."""
    board = board.copy()
    ours = 0 if engine_first else 1
    played = []
    for i, text in enumerate(moves):
        listed = chess.Move.from_uci(text)
        if listed not in board.legal_moves:
            raise ValueError(f"puzzle move {i} ({text}) is illegal in {board.fen()}")
        if i % 2 == ours:
            move = engine.play(board)
            played.append(move.uci())
            if move != listed:
                board.push(move)
                return board.is_checkmate(), played
        board.push(listed)
    return True, played


@dataclass
class Puzzle:
    board: chess.Board
    moves: list[str]
    rating: int | None
    engine_first: bool
    name: str = ""


def _read_lichess_csv(path: Path) -> list[Puzzle]:
    puzzles = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = {"PGN", "Moves"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: a Lichess puzzle CSV needs the columns PGN, Moves (and Rating); missing {sorted(missing)}")
        for i, row in enumerate(reader):
            game = chess.pgn.read_game(io.StringIO(row["PGN"]))
            board = game.end().board()
            rating = int(row["Rating"]) if row.get("Rating") else None
            puzzles.append(Puzzle(board, row["Moves"].split(), rating, engine_first=False, name=row.get("PuzzleId", str(i))))
    return puzzles


def _read_problem_pgn(path: Path) -> list[Puzzle]:
    """Composed problems (e.g. pychess ``mate_in_N.pgn``): the FEN header, then the solution mainline."""
    puzzles = []
    with open(path, encoding="utf-8", errors="replace") as f:
        while (game := chess.pgn.read_game(f)) is not None:
            moves = [m.uci() for m in game.mainline_moves()]
            if not moves or game.errors:
                continue
            name = " ".join(filter(None, [game.headers.get("White"), "-", game.headers.get("Black"), game.headers.get("Termination")]))
            puzzles.append(Puzzle(game.board(), moves, None, engine_first=True, name=name))
    return puzzles


def read_puzzles(path: str | os.PathLike) -> list[Puzzle]:
    """Puzzles from a Lichess-format CSV (PGN, Moves, Rating) or a problem PGN (FEN header + solution)."""
    path = Path(path)
    reader = {".csv": _read_lichess_csv, ".pgn": _read_problem_pgn}.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"{path}: expected a Lichess puzzle .csv or a problem .pgn")
    return reader(path)


def puzzle_accuracy(engine: ChessEngine, path: str | os.PathLike, *, limit: int | None = None, progress: bool = False) -> dict:
    from tqdm.auto import tqdm

    puzzles = read_puzzles(path)[:limit]
    if not puzzles:
        raise ValueError(f"{path} holds no puzzles")
    results = []
    for p in tqdm(puzzles, desc="puzzles", disable=not progress):
        solved, played = evaluate_puzzle(engine, p.board, p.moves, engine_first=p.engine_first)
        results.append({"name": p.name, "rating": p.rating, "solved": solved, "engine_moves": played})
    return {"accuracy": float(np.mean([r["solved"] for r in results])), "num_puzzles": len(results), "puzzles": results}


# ----------------------------------------------------------------------------- matches
def elo_difference(wins: int, draws: int, losses: int, z: float = 1.96) -> tuple[float, float]:
    """Elo difference from a score and its ``z``-sigma error (delta method on the per-game score variance); a perfect
    or zero score gives ±inf (the data cannot bound it)."""
    n = wins + draws + losses
    if n == 0:
        raise ValueError("no games played")
    s = (wins + 0.5 * draws) / n
    if s <= 0 or s >= 1:
        return (math.inf if s >= 1 else -math.inf), math.inf
    elo = -400 * math.log10(1 / s - 1)
    variance = (wins * (1 - s) ** 2 + draws * (0.5 - s) ** 2 + losses * s**2) / n
    error = z * math.sqrt(variance / n) * 400 / (math.log(10) * s * (1 - s))
    return elo, error


@dataclass
class MatchResult:
    wins: int = 0
    draws: int = 0
    losses: int = 0
    adjudicated: int = 0  # decisive games ended by the judge's verdict (in wins and losses)
    games: list[str] = field(default_factory=list)  # PGN texts

    def summary(self) -> dict:
        """Counts, score and Elo ± 95% error; Elo is None for a 0% or 100% score (the games cannot bound it)."""
        elo, err = elo_difference(self.wins, self.draws, self.losses)  # raises for no games
        elo, err = (None, None) if math.isinf(elo) else (elo + 0.0, err)  # + 0.0: no "-0.0"
        games = self.wins + self.draws + self.losses
        return {"games": games, "wins": self.wins, "draws": self.draws, "losses": self.losses,
                "adjudicated": self.adjudicated, "score": (self.wins + 0.5 * self.draws) / games, "elo": elo,
                "elo_error_95": err}


# ----------------------------------------------------------------------------- opponents
# the official tournament's adjudication: a win once Stockfish (0.01 s per position) rates a side above 1300 cp
ADJUDICATION_TIME = 0.01
ADJUDICATION_CP = 1300

_PIECE_VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}


class RandomMover:
    """Plays a uniformly random legal move (seeded)."""

    name = "random mover"

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def play(self, board: chess.Board) -> chess.Move:
        return self.rng.choice(sorted(board.legal_moves, key=lambda m: m.uci()))


class MaterialGreedy(RandomMover):
    """One-ply greedy: mates if it can, else maximises its material balance after the move (random ties)."""

    name = "material-greedy (1 ply)"

    @staticmethod
    def material(board: chess.Board, color: chess.Color) -> int:
        return sum(_PIECE_VALUES[p.piece_type] * (1 if p.color == color else -1) for p in board.piece_map().values())

    def play(self, board: chess.Board) -> chess.Move:
        me = board.turn
        scored = []
        for move in sorted(board.legal_moves, key=lambda m: m.uci()):
            board.push(move)
            score = math.inf if board.is_checkmate() else self.material(board, me)
            board.pop()
            scored.append((score, move))
        best = max(s for s, _ in scored)
        return self.rng.choice([m for s, m in scored if s == best])


class StockfishPlayer(contextlib.AbstractContextManager):
    """Stockfish at a Skill Level and node/depth limit, as a context (its process ends with the block)."""

    def __init__(self, path: str = DEFAULT_STOCKFISH, *, skill_level: int | None = 0, nodes: int | None = 1000, depth: int | None = None):
        self.engine = chess.engine.SimpleEngine.popen_uci(path)
        self.engine.configure({"Threads": 1, **({"Skill Level": skill_level} if skill_level is not None else {})})
        self.limit = chess.engine.Limit(nodes=nodes, depth=depth)
        self.name = f"Stockfish (skill {skill_level}, nodes {nodes}, depth {depth})"

    def play(self, board: chess.Board) -> chess.Move:
        return self.engine.play(board, self.limit).move

    def __exit__(self, *exc) -> None:
        self.engine.quit()


def _adjudicate(judge: chess.engine.SimpleEngine, board: chess.Board, seconds: float) -> tuple[chess.Color, str] | None:
    """(winner, reason) when Stockfish rates one side above the official threshold or sees a mate, else None."""
    score = judge.analyse(board, chess.engine.Limit(time=seconds))["score"].white()
    if score.is_mate():
        return (score.mate() > 0, f"mate in {abs(score.mate())}")  # white mates when mate() > 0
    if abs(score.score()) > ADJUDICATION_CP:
        return (score.score() > 0, f"{score.score():+d} cp")
    return None


def play_match(engine: ChessEngine, opponent=None, *, games: int = 10, stockfish: str = DEFAULT_STOCKFISH,
               skill_level: int | None = 0, nodes: int | None = 1000, depth: int | None = None, book: str | None = None,
               opening_plies: int = 6, max_plies: int = 400, adjudication_time: float | None = ADJUDICATION_TIME,
               seed: int = 0, pgn_path: str | os.PathLike | None = None, name: str = "zoo-chess",
               progress: bool = False) -> MatchResult:
    """Play ``games`` games vs ``opponent`` (anything with ``play(board) -> Move`` and a ``name``; default: Stockfish
    at ``skill_level`` / ``nodes`` / ``depth``) in colour-swapped pairs from opening-book starts.

    A game ends at checkmate, stalemate, insufficient material, a claimable threefold or fifty-move draw, or
    ``max_plies`` (a draw). As in the official tournament, after every move Stockfish (full strength,
    ``adjudication_time`` seconds; None: play every game out) adjudicates a win for the side it rates above 1300 cp
    or with a mate score. Writes all games to ``pgn_path`` if given."""
    from tqdm.auto import tqdm

    from zoo.io import write_text_atomic

    with contextlib.ExitStack() as engines:
        if opponent is None:
            opponent = engines.enter_context(StockfishPlayer(stockfish, skill_level=skill_level, nodes=nodes, depth=depth))
        judge = None
        if adjudication_time is not None:  # full strength: no Skill Level, no node limit
            judge = engines.enter_context(StockfishPlayer(stockfish, skill_level=None, nodes=None)).engine
        rng = random.Random(seed)
        result = MatchResult()
        for g in tqdm(range(games), desc="games", disable=not progress):
            model_white = g % 2 == 0
            if model_white:  # a new opening for each colour-swapped pair
                opening = chess.Board()
                if book:
                    play_book(opening, book, opening_plies, rng)
            board = opening.copy()
            white, black = (engine, opponent) if model_white else (opponent, engine)
            verdict = None  # the judge's (winner, reason), once it has one
            while verdict is None and not board.is_game_over(claim_draw=True) and len(board.move_stack) < max_plies:
                board.push((white if board.turn == chess.WHITE else black).play(board))
                if judge is not None and not board.is_game_over(claim_draw=True):
                    verdict = _adjudicate(judge, board, adjudication_time)
            outcome = board.outcome(claim_draw=True)
            winner = verdict[0] if verdict else (outcome.winner if outcome else None)
            if winner is None:
                result.draws += 1
                text = "1/2-1/2"
            else:
                result.wins += winner == model_white
                result.losses += winner != model_white
                text = "1-0" if winner == chess.WHITE else "0-1"
            game = chess.pgn.Game.from_board(board)
            game.headers.update({"Event": f"{name} vs {opponent.name}", "Round": str(g + 1), "Result": text,
                                 "White": name if model_white else opponent.name, "Black": opponent.name if model_white else name})
            if verdict is not None:
                result.adjudicated += 1
                game.headers["Termination"] = f"adjudicated: Stockfish {verdict[1]} after {adjudication_time} s"
            elif outcome is None:
                game.headers["Termination"] = f"adjudicated draw after {max_plies} plies"
            result.games.append(str(game))
        if pgn_path is not None:
            write_text_atomic(pgn_path, "\n\n".join(result.games) + "\n")
        return result
