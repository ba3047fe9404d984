"""The three tables every ChessBench model shares: FEN tokens, the 1968-move action table, return buckets.

Everything here follows the official searchless_chess encoding bit for bit (see the chess spec): a FEN becomes 77
tokens over a 31-character vocabulary, a UCI move its index in the official action order, and a win probability one
of 128 uniform buckets.
"""

from __future__ import annotations

import math
import re

import chess
import numpy as np

__all__ = ["VOCAB", "FEN_LENGTH", "NUM_ACTIONS", "ACTIONS", "ACTION_TO_INDEX", "tokenize", "square_token_index",
           "action_index", "win_probability", "mate_win_probability", "bucket_values", "to_bucket"]

# ----------------------------------------------------------------------------- FEN tokens
VOCAB = tuple("0123456789abcdefgh") + tuple("pnrkqPBNRQKw.")
_INDEX = {c: i for i, c in enumerate(VOCAB)}
_EMPTY = _INDEX["."]
FEN_LENGTH = 77  # side 1 + board 64 + castling 4 + en passant 2 + halfmove 3 + fullmove 3

_PIECES = set("pnbrqkPNBRQK")
_EN_PASSANT = re.compile(r"^[a-h][36]$")


def _fen_error(fen: str, problem: str) -> ValueError:
    return ValueError(f"invalid FEN {fen!r}: {problem} (expected e.g. 'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1')")


def _padded(text: str, width: int) -> list[int]:
    return [_INDEX[c] for c in text] + [_EMPTY] * (width - len(text))


def _counter(fen: str, text: str, what: str) -> list[int]:
    if not text.isdigit() or not text.isascii():
        raise _fen_error(fen, f"the {what} {text!r} is not a non-negative integer")
    if len(text) > 3:
        raise _fen_error(fen, f"the {what} {text!r} has more than 3 digits, which the 77-token encoding cannot hold")
    return _padded(text, 3)


def tokenize(fen: str) -> np.ndarray:
    """FEN -> 77 token ids (uint8), in the official order: side, board a8..h1, castling, en passant, counters. The FEN
    is tokenized as written (castling letters in their order, an en-passant square even if no capture is legal)."""
    if not isinstance(fen, str):
        raise TypeError(f"tokenize expects a FEN string, got {type(fen).__name__}")
    fields = fen.split(" ")
    if len(fields) != 6:
        raise _fen_error(fen, f"it has {len(fields)} space-separated fields, not 6")
    placement, side, castling, en_passant, halfmove, fullmove = fields
    if side not in ("w", "b"):
        raise _fen_error(fen, f"the side to move {side!r} is neither 'w' nor 'b'")
    tokens = [_INDEX[side]]

    ranks = placement.split("/")
    if len(ranks) != 8:
        raise _fen_error(fen, f"the placement has {len(ranks)} ranks, not 8")
    for rank in ranks:
        row = []
        for c in rank:
            if c not in _PIECES and c not in "12345678":
                raise _fen_error(fen, f"the placement contains {c!r}, which is neither a piece letter nor 1-8")
            row += [_EMPTY] * int(c) if c.isdigit() else [_INDEX[c]]
        if len(row) != 8:
            raise _fen_error(fen, f"the rank {rank!r} covers {len(row)} squares, not 8")
        tokens += row
    if castling != "-" and (not castling or any(c not in "KQkq" for c in castling)
                            or len(set(castling)) != len(castling)):
        raise _fen_error(fen, f"the castling field {castling!r} is not '-' or distinct letters from 'KQkq'")
    if en_passant != "-" and not _EN_PASSANT.match(en_passant):
        raise _fen_error(fen, f"the en-passant field {en_passant!r} is not '-' or a square on rank 3 or 6")
    tokens += _padded(castling.replace("-", ""), 4) + _padded(en_passant.replace("-", ""), 2)
    tokens += _counter(fen, halfmove, "halfmove clock")
    tokens += _counter(fen, fullmove, "fullmove number")
    return np.asarray(tokens, dtype=np.uint8)  # (77,)


def square_token_index(square):
    """Where a square's token sits in ``tokenize(fen)`` (a1 = 0 ... h8 = 63; ints or integer arrays/tensors):
    after the side to move, the board runs a8..h1."""
    return 1 + (7 - square // 8) * 8 + square % 8


# ----------------------------------------------------------------------------- action table
def _build_actions() -> tuple[str, ...]:
    """The official order: per source square a1..h8, queen targets then knight targets (each ascending),
    followed by the 176 promotions (rank 2->1 then 7->8; per file: push, left capture, right capture; q r b n)."""
    actions = []
    for source in range(64):
        steps = {t: (abs(t % 8 - source % 8), abs(t // 8 - source // 8)) for t in range(64) if t != source}
        queen = [t for t, (df, dr) in steps.items() if df == 0 or dr == 0 or df == dr]
        knight = [t for t, (df, dr) in steps.items() if {df, dr} == {1, 2}]
        actions += [chess.square_name(source) + chess.square_name(t) for t in queen + knight]
    for from_rank, to_rank in (("2", "1"), ("7", "8")):
        for i, file in enumerate(chess.FILE_NAMES):
            captures = chess.FILE_NAMES[max(i - 1, 0):i] + chess.FILE_NAMES[i + 1:i + 2]  # the files beside, if any
            for target in [file] + captures:
                actions += [file + from_rank + target + to_rank + piece for piece in "qrbn"]
    return tuple(actions)


ACTIONS: tuple[str, ...] = _build_actions()
NUM_ACTIONS = len(ACTIONS)  # 1968
ACTION_TO_INDEX: dict[str, int] = {a: i for i, a in enumerate(ACTIONS)}


def action_index(uci: str) -> int:
    """The official action id of a UCI move string; unknown or malformed moves raise ``ValueError``."""
    try:
        return ACTION_TO_INDEX[uci]
    except (KeyError, TypeError):
        raise ValueError(f"{uci!r} is not a move of the 1968-move action table (expected UCI like 'e2e4' or 'a7a8q'; "
                         "null moves and drops are not representable)") from None


# ----------------------------------------------------------------------------- values and buckets
LICHESS_SLOPE = 0.00368208


def win_probability(centipawns: float) -> float:
    """Lichess win probability of the side to move (float64, no ±1000 cp clamp, as the official code)."""
    return 0.5 + 0.5 * (2 / (1 + math.exp(-LICHESS_SLOPE * centipawns)) - 1)


def mate_win_probability(mate: int) -> float:
    """Zoo convention for mate scores: mate in n > 0 for the side to move -> 1, being mated (n <= 0) -> 0."""
    return 1.0 if mate > 0 else 0.0


def bucket_values(num_buckets: int = 128) -> np.ndarray:
    """The bucket centres (k + 0.5)/K (float64): a bucket distribution's expected win prob is P @ values."""
    return (np.arange(num_buckets, dtype=np.float64) + 0.5) / num_buckets


def to_bucket(win_prob, num_buckets: int = 128):
    """Bucket index of win probabilities: the number of edges strictly below ``p`` (p on edge j/K -> j-1)."""
    p = np.asarray(win_prob, dtype=np.float64)
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"win probabilities must lie in [0, 1], got {win_prob!r}")
    edges = np.arange(1, num_buckets, dtype=np.float64) / num_buckets
    out = np.searchsorted(edges, p, side="left")
    return int(out) if out.ndim == 0 else out
