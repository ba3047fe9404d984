"""A UCI front end for a ChessBench model, and a small terminal game.

``zoo chess uci NAME`` speaks the Universal Chess Interface on stdin/stdout, so any chess GUI or
``chess.engine.SimpleEngine.popen_uci(["zoo", "chess", "uci", NAME])`` can play the model. The model
searches nothing: every ``go`` is answered at once with the policy's move (time controls are ignored).
"""

from __future__ import annotations

import math
import sys
from typing import TextIO

import chess

from zoo.chess.engine import ChessEngine, parse_move

__all__ = ["UCIProtocol", "win_prob_to_centipawns", "play_terminal"]

_LICHESS_SLOPE = 0.00368208


def win_prob_to_centipawns(p: float) -> int:
    """Inverse of the Lichess win-probability formula; certain wins/losses map to about ±7500 cp."""
    p = min(max(p, 1e-12), 1 - 1e-12)
    return int(round(math.log(p / (1 - p)) / _LICHESS_SLOPE))


class UCIProtocol:
    """Line-by-line UCI state machine around a :class:`ChessEngine`."""

    def __init__(self, engine: ChessEngine, name: str, out: TextIO):
        self.engine = engine
        self.name = name
        self.out = out
        self.board = chess.Board()

    def send(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def handle(self, line: str) -> bool:
        """Process one command; returns False on ``quit``."""
        tokens = line.split()
        if not tokens:
            return True
        command, args = tokens[0], tokens[1:]
        if command == "uci":
            self.send(f"id name zoo-chess {self.name}")
            self.send("id author zoo (ChessBench transformer, searchless)")
            self.send("uciok")
        elif command == "isready":
            self.send("readyok")
        elif command == "ucinewgame":
            self.board = chess.Board()
        elif command == "position":
            self._position(args)
        elif command == "go":
            self._go()
        elif command == "quit":
            return False
        elif command in ("stop", "ponderhit", "setoption", "debug", "register"):
            pass  # answers are immediate; there are no options
        else:
            self.send(f"info string unknown command {command!r}")
        return True

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
            self.send(f"info string error: {err}")

    def _go(self) -> None:
        if not any(self.board.legal_moves):
            self.send("bestmove 0000")
            return
        analysis = self.engine.analyse(self.board)
        move = self.engine.choose(analysis)
        i = analysis.moves.index(move)
        if analysis.policy == "behavioral_cloning":
            self.send(f"info depth 1 nodes {len(analysis.moves)} pv {move.uci()} string p={math.exp(analysis.scores[i]):.4f}")
        else:
            cp = win_prob_to_centipawns(float(analysis.scores[i]))
            self.send(f"info depth 1 nodes {len(analysis.moves)} score cp {cp} pv {move.uci()}")
        self.send(f"bestmove {move.uci()}")

    def loop(self, stream: TextIO) -> None:
        for line in stream:
            if not self.handle(line.strip()):
                break


def play_terminal(engine: ChessEngine, *, human: chess.Color = chess.WHITE, fen: str | None = None,
                  stdin: TextIO = sys.stdin, out: TextIO = sys.stdout) -> chess.Board:
    """Play the model in the terminal: type moves in UCI or SAN; 'undo' takes back a move pair, 'quit' stops."""
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


def main(argv: list[str] | None = None) -> None:
    """``python -m zoo.chess.uci NAME``: the UCI loop without the zoo CLI."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m zoo.chess.uci")
    parser.add_argument("name")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--threads", type=int)
    args = parser.parse_args(argv)
    run_uci(args.name, device=args.device, temperature=args.temperature, threads=args.threads)


def run_uci(name: str, *, device: str = "cpu", temperature: float | None = None, threads: int | None = None) -> None:
    import torch

    import zoo

    if threads is not None:
        torch.set_num_threads(threads)
    engine = zoo.load(name, device=device).engine(temperature=temperature)
    UCIProtocol(engine, name, sys.stdout).loop(sys.stdin)


if __name__ == "__main__":
    main()
