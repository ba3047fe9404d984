"""A UCI front end for a ChessBench model, and a small terminal game.

``zoo chess uci NAME`` speaks the Universal Chess Interface on stdin/stdout. A ``go`` values the legal moves with one
batched forward (no search); when the time limit is too short for all of them, it values them in chunks, most forcing
first, and plays the best one valued before the deadline. ``Move Overhead``: ms kept back from each time limit.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable, TextIO

import chess

if TYPE_CHECKING:
    from zoo.chess.engine import ChessEngine, MoveAnalysis

__all__ = ["UCIProtocol", "GoLimits", "win_prob_to_centipawns", "play_terminal", "run_uci"]

_DEFAULT_OVERHEAD_MS = 10
_MAX_MULTIPV = 500  # as Stockfish's; more than any position's legal moves
_MOVES_TO_GO = 30  # a clock without movestogo is shared as if this many moves were left
_PLAN_SHARE = 0.8  # work is planned for this share of the time left: a forward's time varies on a busy CPU
_GO_FLAGS = ("ponder", "infinite")
_GO_NUMBERS = ("wtime", "btime", "winc", "binc", "movestogo", "depth", "nodes", "mate", "movetime")


def win_prob_to_centipawns(p: float) -> int:
    """Inverse of the Lichess win-probability formula; certain wins/losses map to about ±7500 cp."""
    from zoo.chess.tokenizer import LICHESS_SLOPE  # numpy: not before ``uciok``

    p = min(max(p, 1e-12), 1 - 1e-12)
    return int(round(math.log(p / (1 - p)) / LICHESS_SLOPE))


class GoLimits:
    """The arguments of one ``go`` command; ``held`` (``infinite``, ``ponder``): answer at ``stop`` or ``ponderhit``."""

    def __init__(self, args: list[str], board: chess.Board):
        self.numbers: dict[str, int] = {}
        self.held = False
        self.searchmoves: list[chess.Move] = []
        i = 0
        while i < len(args):
            word = args[i]
            if word in _GO_FLAGS:
                self.held = True
            elif word in _GO_NUMBERS:
                if i + 1 == len(args):
                    raise ValueError(f"go {word} needs a number")
                try:
                    self.numbers[word] = int(args[i + 1])
                except ValueError:
                    raise ValueError(f"go {word} needs an integer, got {args[i + 1]!r}") from None
                i += 1
            elif word == "searchmoves":
                while i + 1 < len(args) and args[i + 1] not in _GO_FLAGS + _GO_NUMBERS:
                    i += 1
                    try:
                        move = chess.Move.from_uci(args[i])
                    except ValueError:
                        move = None
                    if move not in board.legal_moves:
                        raise ValueError(f"searchmoves: {args[i]} is not legal in {board.fen()}")
                    self.searchmoves.append(move)
            else:
                raise ValueError(f"unknown go argument {word!r}")
            i += 1

    def budget(self, turn: chess.Color) -> float | None:
        """Seconds this move may take (None: no limit)."""
        if "movetime" in self.numbers:
            return self.numbers["movetime"] / 1000
        left = self.numbers.get("wtime" if turn == chess.WHITE else "btime")
        if left is None:
            return None
        increment = self.numbers.get("winc" if turn == chess.WHITE else "binc", 0)
        share = left / max(self.numbers.get("movestogo", _MOVES_TO_GO), 1) + increment
        return min(share, left / 2) / 1000


def _forcing_first(board: chess.Board, moves: list[chess.Move]) -> list[chess.Move]:
    """Checks, captures (bigger victims first) and promotions before quiet moves; otherwise the given order."""

    def key(move: chess.Move) -> int:
        victim = board.piece_type_at(move.to_square) or (chess.PAWN if board.is_en_passant(move) else 0)
        return -(8 * board.gives_check(move) + victim + (move.promotion or 0))

    return sorted(moves, key=key)


class UCIProtocol:
    """Line-by-line UCI state machine around the :class:`ChessEngine` that ``load(name)`` returns. ``load`` runs in a
    background thread, started once the first command is answered (so that ``uciok`` does not compete with it for the
    interpreter) and whenever the ``Model`` option changes."""

    def __init__(self, name: str, out: TextIO, *, load: Callable[[str], ChessEngine], threads: int | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.name = name
        self.out = out
        self.clock = clock
        self.board: chess.Board | None = chess.Board()  # None after a position command that failed
        usable_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self.threads = threads or usable_cores
        self.overhead_ms = _DEFAULT_OVERHEAD_MS
        self.multipv = 1
        self.row_seconds = 0.0  # measured seconds per valued move (set by the load), for the time budget
        self._load = load
        self._engine: ChessEngine | None = None
        self._loading: threading.Thread | None = None
        self._load_error: BaseException | None = None
        self._threads_set: int | None = None
        self._held: str | None = None  # the bestmove line of an infinite / ponder search

    # ------------------------------------------------------------------ I/O
    def send(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def loop(self, stream: TextIO) -> None:
        for line in stream:
            if not self.handle(line.strip()):
                break

    def handle(self, line: str) -> bool:
        """Process one command; returns False on ``quit``."""
        start = self.clock()
        tokens = line.split()
        if not tokens:
            return True
        command, args = tokens[0], tokens[1:]
        if command == "uci":
            self.send(f"id name zoo-chess {self.name}")
            self.send("id author zoo (ChessBench transformer, searchless)")
            self.send(f"option name Threads type spin default {self.threads} min 1 max 512")
            self.send(f"option name Move Overhead type spin default {_DEFAULT_OVERHEAD_MS} min 0 max 5000")
            self.send(f"option name MultiPV type spin default 1 min 1 max {_MAX_MULTIPV}")
            self.send(f"option name Model type string default {self.name}")
            self.send("uciok")
        elif command == "isready":
            self._ready_engine()
            self.send("readyok")
        elif command == "setoption":
            self._setoption(args)
        elif command == "ucinewgame":
            self.board = chess.Board()
        elif command == "position":
            self._position(args)
        elif command == "go":
            self._go(args, start)
        elif command in ("stop", "ponderhit"):
            if self._held:
                self.send(self._held)
                self._held = None
        elif command == "quit":
            return False
        elif command in ("debug", "register"):
            pass  # nothing to debug or register
        else:
            self.send(f"info string unknown command {command!r}")
        if self._loading is None:
            self._start_loading(self.name)
        return True

    # ------------------------------------------------------------------ the engine
    def _start_loading(self, name: str) -> None:
        def work() -> None:
            try:
                engine = self._load(name)
                # a first analysis warms the kernels up; a second gives the first cost per valued move
                board = chess.Board()
                engine.analyse(board)
                begin = self.clock()
                engine.analyse(board)
                self.row_seconds = (self.clock() - begin) / board.legal_moves.count()
                self._engine, self.name = engine, name
            except Exception as err:  # noqa: BLE001  (reported where the engine is next needed)
                self._load_error = err

        self._load_error = None
        self._loading = threading.Thread(target=work, name=f"load {name}", daemon=True)
        self._loading.start()

    def _ready_engine(self) -> ChessEngine:
        """The engine, once loaded. A failed first load raises; a failed ``Model`` change keeps the old model."""
        if self._loading is None:
            self._start_loading(self.name)
        self._loading.join()
        if self._load_error is not None:
            err, self._load_error = self._load_error, None
            if self._engine is None:
                self.send(f"info string error: {err}")
                raise err
            self.send(f"info string error: {err}; still playing {self.name}")
        if self._threads_set != self.threads:
            import torch

            torch.set_num_threads(self.threads)
            self._threads_set = self.threads
        return self._engine

    def _setoption(self, args: list[str]) -> None:
        name, _, value = " ".join(args).removeprefix("name ").partition(" value ")
        name, value = name.strip().lower(), value.strip()
        if name in ("threads", "move overhead", "multipv"):
            try:
                number = int(value)
            except ValueError:
                self.send(f"info string error: option {name!r} needs an integer, got {value!r}")
                return
            if name == "threads":
                self.threads = max(1, number)
            elif name == "multipv":
                self.multipv = min(max(1, number), _MAX_MULTIPV)
            else:
                self.overhead_ms = max(0, number)
        elif name == "model" and value:
            if self._loading is not None:
                self._loading.join()
            self._start_loading(value)
        else:
            self.send(f"info string error: unknown option {name!r} (or no value)")

    # ------------------------------------------------------------------ commands
    def _position(self, args: list[str]) -> None:
        try:
            if not args:
                raise ValueError("position needs 'startpos' or 'fen <FEN>'")
            if args[0] == "startpos":
                board, rest = chess.Board(), args[1:]
            elif args[0] == "fen":
                end = args.index("moves") if "moves" in args else len(args)
                board, rest = chess.Board(" ".join(args[1:end])), args[end:]
            else:
                raise ValueError(f"position needs 'startpos' or 'fen', got {args[0]!r}")
            if rest and rest[0] == "moves":
                for text in rest[1:]:
                    move = chess.Move.from_uci(text)
                    if move not in board.legal_moves:
                        raise ValueError(f"illegal move {text} in {board.fen()}")
                    board.push(move)
            self.board = board
        except ValueError as err:
            self.board = None  # never play on from the position before the bad command
            self.send(f"info string error: {err}")

    def _go(self, args: list[str], start: float) -> None:
        try:
            if self.board is None:
                raise ValueError("no position to play: the last position command failed")
            limits = GoLimits(args, self.board)
        except ValueError as err:
            self.send(f"info string error: {err}")
            self._answer("bestmove 0000", held=False)
            return
        if not any(self.board.legal_moves):
            self._answer("bestmove 0000", limits.held)
            return
        engine = self._ready_engine()
        budget = None if limits.held else limits.budget(self.board.turn)
        deadline = None if budget is None else start + budget - self.overhead_ms / 1000
        analysis, valued = self._analyse(engine, self.board, limits.searchmoves, deadline)
        move = engine.choose(analysis)
        ms = int(1000 * (self.clock() - start))
        # the played move is line 1 (with a temperature it need not be the best valued), the others follow by value
        scores = dict(analysis.ranked())
        lines = [move, *(m for m in scores if m != move)][: self.multipv]
        for k, line_move in enumerate(lines, 1):
            score = scores[line_move]
            head = f"info depth 1 multipv {k}" if self.multipv > 1 else "info depth 1"
            if analysis.policy == "behavioral_cloning":
                self.send(f"{head} nodes {valued} time {ms} pv {line_move.uci()} string p={math.exp(score):.4f}")
            else:
                self.send(f"{head} nodes {valued} time {ms} score cp {win_prob_to_centipawns(score)} pv {line_move.uci()}")
        self._answer(f"bestmove {move.uci()}", limits.held)

    def _answer(self, line: str, held: bool) -> None:
        if held:
            self._held = line
        else:
            self.send(line)

    def _analyse(self, engine: ChessEngine, board: chess.Board, searchmoves: list[chess.Move],
                 deadline: float | None) -> tuple[MoveAnalysis, int]:
        """The analysis of as many of the moves as fit before ``deadline``, and how many it valued."""
        from zoo.chess.engine import legal_moves

        moves = [m for m in legal_moves(board) if not searchmoves or m in searchmoves]
        bc = engine.policy == "behavioral_cloning"  # one row values every move: nothing to budget
        if bc or deadline is None or self.row_seconds * len(moves) <= _PLAN_SHARE * (deadline - self.clock()):
            return self._timed(engine, board, moves, 1 if bc else len(moves)), len(moves)
        parts, todo = [], _forcing_first(board, moves)
        while todo:
            fits = int(_PLAN_SHARE * (deadline - self.clock()) / self.row_seconds)
            if parts and fits < 1:
                break
            n = max(1, min(len(todo), fits))
            parts.append(self._timed(engine, board, todo[:n], n))
            todo = todo[n:]
        return _merge(parts), sum(len(p.moves) for p in parts)

    def _timed(self, engine: ChessEngine, board: chess.Board, moves: list[chess.Move], rows: int) -> MoveAnalysis:
        """One batched analysis of ``moves`` (legal, in the official order), updating the measured cost per row."""
        begin = self.clock()
        analysis = engine.analyse(board, moves)
        self.row_seconds = 0.5 * self.row_seconds + 0.5 * (self.clock() - begin) / rows
        return analysis


def _merge(parts: list[MoveAnalysis]) -> MoveAnalysis:
    """One analysis from analyses of disjoint move subsets of a position, in the official move order."""
    import numpy as np

    from zoo.chess.engine import ACTION_TO_INDEX

    moves = [m for p in parts for m in p.moves]
    order = sorted(range(len(moves)), key=lambda i: ACTION_TO_INDEX[moves[i].uci()])
    per_move = {name: np.concatenate([getattr(p, name) for p in parts])[order]
                for name in ("win_probs", "scores", "repetition_draw", "log_probs")}
    return dataclasses.replace(parts[0], moves=[moves[i] for i in order], **per_move)


def play_terminal(engine: ChessEngine, *, human: chess.Color = chess.WHITE, fen: str | None = None,
                  stdin: TextIO = sys.stdin, out: TextIO = sys.stdout) -> chess.Board:
    """Play the model in the terminal: type moves in UCI or SAN; 'undo' takes back a move pair, 'quit' stops."""
    from zoo.chess.engine import parse_move

    board = chess.Board(fen) if fen else chess.Board()
    while not board.is_game_over(claim_draw=True):
        if board.turn == human:
            out.write(f"\n{board.unicode(invert_color=True, borders=True, orientation=human)}\n{board.fen()}\nyour move> ")
            out.flush()
            line = stdin.readline()
            if not line or line.strip() == "quit":
                break
            if line.strip() == "undo":
                for _ in range(min(2, len(board.move_stack))):
                    board.pop()
                continue
            try:
                board.push(parse_move(board, line))
            except ValueError as err:
                out.write(f"{err}\n")
        else:
            analysis = engine.analyse(board)
            move = engine.choose(analysis)
            value = float(analysis.scores[analysis.moves.index(move)])
            shown = f"p={math.exp(value):.3f}" if analysis.policy == "behavioral_cloning" else f"win {100 * value:.1f}%"
            out.write(f"model plays {board.san(move)} ({shown})\n")
            board.push(move)
    outcome = board.outcome(claim_draw=True)
    out.write(f"\n{board.unicode(invert_color=True, borders=True, orientation=human)}\n")
    out.write(f"game over: {outcome.result()} ({outcome.termination.name.lower()})\n" if outcome else "game stopped\n")
    return board


def run_uci(name: str, *, device: str = "cpu", temperature: float | None = None, threads: int | None = None,
            precision: str = "fp32", stdin: TextIO = sys.stdin, out: TextIO = sys.stdout) -> None:
    """The UCI loop for ``name``; a catalog name is checked before ``uci`` is answered (without importing torch)."""
    if "/" not in name and not name.startswith((".", "~")) and not os.path.isdir(name):  # not hf://, not a path
        from zoo.registry import get_entry

        get_entry(name)  # an unknown name fails here, with the closest names, not in the loading thread

    def load(model: str) -> ChessEngine:
        import zoo

        return zoo.load(model, device=device).engine(temperature=temperature, precision=precision)

    UCIProtocol(name, out, load=load, threads=threads).loop(stdin)

