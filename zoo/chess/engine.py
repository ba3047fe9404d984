"""Playing with a ChessBench model: the official AV / SV / BC move choice, batched, plus an SVG board.

    engine = zoo.load("chess-9m").engine()
    move = engine.play(board)                   # greedy, ties -> earliest in the official action order
    analysis = engine.analyse(board)            # every legal move with its win probability
    svg = board_svg(board, analysis)            # the position with the model's move values
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import chess
import numpy as np
import torch

from zoo.chess.model import LastPositionPredictor
from zoo.chess.tokenizer import ACTION_TO_INDEX, bucket_values, tokenize

__all__ = ["ChessEngine", "MoveAnalysis", "legal_moves", "board_svg", "parse_move"]


def legal_moves(board: chess.Board) -> list[chess.Move]:
    """The legal moves in the official order (sorted by action id)."""
    return sorted(board.legal_moves, key=lambda m: ACTION_TO_INDEX[m.uci()])


def parse_move(board: chess.Board, text: str) -> chess.Move:
    """A legal move from UCI or SAN text; anything else raises ``ValueError`` naming the problem."""
    text = text.strip()
    try:
        move = chess.Move.from_uci(text)
    except ValueError:
        try:
            return board.parse_san(text)
        except ValueError:
            raise ValueError(f"{text!r} is neither a UCI nor a SAN move (e.g. 'e2e4' or 'Nf3')") from None
    if move not in board.legal_moves:
        raise ValueError(f"{text} is not legal in {board.fen()}; legal: {' '.join(m.uci() for m in legal_moves(board))}")
    return move


def _is_repetition_draw(board: chess.Board) -> bool:
    """Official rule: fivefold, or the side to move can claim threefold (incl. by one of its own moves)."""
    # A position recurs 4 plies later at the earliest and only across reversible moves, so a third occurrence,
    # even one reached by the mover's next move, needs a halfmove clock of 7 or more: below that, skip
    # python-chess's search (which tries every legal move), with the same answer.
    if board.halfmove_clock < 7:
        return False
    return board.is_fivefold_repetition() or board.can_claim_threefold_repetition()


@dataclass
class MoveAnalysis:
    """Per legal move (official order): ``win_probs`` is the model's raw win probability for the side to move (AV/SV)
    or its probability (BC); the choice maximises ``scores`` (AV/SV: repetition draws at 0.5; BC: log-probs)."""

    fen: str
    policy: str
    moves: list[chess.Move]
    win_probs: np.ndarray  # (N,) float64
    scores: np.ndarray  # (N,) float64
    repetition_draw: np.ndarray  # (N,) bool
    log_probs: np.ndarray  # AV/SV: (N, K) bucket log-probs from the mover's view; BC: (N,) = scores
    state_win_prob: float | None = None  # SV only: the value of the current position

    def best(self) -> chess.Move:
        return self.moves[int(np.argmax(self.scores))]  # first maximum: ties -> earliest action id

    def ranked(self) -> list[tuple[chess.Move, float]]:
        order = sorted(range(len(self.moves)), key=lambda i: (-self.scores[i], i))
        return [(self.moves[i], float(self.scores[i])) for i in order]


class ChessEngine:
    """The official engines of searchless_chess for one model (its ``policy`` decides AV, SV or BC). Greedy with
    ``temperature=None``; a positive temperature samples from softmax(scores / T) as the official engines do.
    ``batch_size`` bounds the rows per network call; for ``precision`` see ``LastPositionPredictor``."""

    def __init__(self, module, *, temperature: float | None = None, batch_size: int = 2048, seed: int | None = None,
                 precision: str = "fp32"):
        if temperature is not None and temperature <= 0:
            raise ValueError(f"temperature must be positive or None (greedy), got {temperature}")
        self.module = module
        self.policy = module.cfg.policy
        self.temperature = temperature
        self.batch_size = batch_size
        self.rng = np.random.default_rng(seed)
        self._values = bucket_values(module.cfg.num_return_buckets)
        self.predictor = LastPositionPredictor(module.model, precision)

    # ------------------------------------------------------------------ network
    def last_log_probs(self, sequences: np.ndarray) -> np.ndarray:
        """Float32 log-probs at the last position for ``(N, T)`` target sequences, in chunks of ``batch_size``."""
        device = next(self.module.parameters()).device
        out = []
        for start in range(0, len(sequences), self.batch_size):
            chunk = torch.from_numpy(sequences[start : start + self.batch_size].astype(np.int64)).to(device)
            out.append(self.predictor(chunk).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.module.cfg.output_size), np.float32)

    def _expected(self, log_probs: np.ndarray) -> np.ndarray:
        return np.inner(np.exp(log_probs), self._values)  # float32 probs x float64 values -> float64

    # ------------------------------------------------------------------ analysis
    def _rows(self, board: chess.Board, moves: list[chess.Move]) -> np.ndarray:
        """The target sequences this policy needs for ``board`` (dummy 0 as the last token)."""
        fen_tokens = tokenize(board.fen()).astype(np.int32)
        if self.policy == "action_value":
            actions = np.array([[ACTION_TO_INDEX[m.uci()], 0] for m in moves], np.int32).reshape(-1, 2)
            return np.concatenate([np.tile(fen_tokens, (len(moves), 1)), actions], axis=1)
        if self.policy == "behavioral_cloning":
            return np.concatenate([fen_tokens, [0]])[None]
        rows = [np.concatenate([fen_tokens, [0]])]  # state value: current position, then every child
        for move in moves:
            board.push(move)
            rows.append(np.concatenate([tokenize(board.fen()).astype(np.int32), [0]]))
            board.pop()
        return np.stack(rows)

    def analyse_many(self, boards: list[chess.Board]) -> list[MoveAnalysis]:
        """Analyse many positions with one batched pass over all their rows."""
        for board in boards:
            if not any(board.legal_moves):
                raise ValueError(f"no legal moves in {board.fen()}: the game is over ({board.result()})")
        if not boards:
            return []
        moves = [legal_moves(board) for board in boards]
        rows = [self._rows(board, board_moves) for board, board_moves in zip(boards, moves)]
        log_probs = np.split(self.last_log_probs(np.concatenate(rows)), np.cumsum([len(r) for r in rows])[:-1])
        return [self._finish(board, m, lp) for board, m, lp in zip(boards, moves, log_probs)]

    def analyse(self, board: chess.Board, moves: list[chess.Move] | None = None) -> MoveAnalysis:
        """Every legal move of ``board`` valued, or only ``moves`` (legal, in the official order)."""
        if moves is None:
            return self.analyse_many([board])[0]
        return self._finish(board, moves, self.last_log_probs(self._rows(board, moves)))

    def _finish(self, board: chess.Board, moves: list[chess.Move], log_probs: np.ndarray) -> MoveAnalysis:
        state = None
        if self.policy == "behavioral_cloning":
            legal = log_probs[0, [ACTION_TO_INDEX[m.uci()] for m in moves]].astype(np.float64)
            scores = legal - np.logaddexp.reduce(legal)  # renormalised over the legal moves
            return MoveAnalysis(board.fen(), self.policy, moves, np.exp(scores), scores, np.zeros(len(moves), bool), scores)
        if self.policy == "state_value":
            state = float(self._expected(log_probs[:1])[0])
            log_probs = log_probs[1:, ::-1]  # a child's buckets are from the opponent's view: flip them
        win_probs = self._expected(log_probs)
        draws = np.zeros(len(moves), bool)
        for i, move in enumerate(moves):
            board.push(move)
            draws[i] = _is_repetition_draw(board)
            board.pop()
        scores = np.where(draws, 0.5, win_probs)
        return MoveAnalysis(board.fen(), self.policy, moves, win_probs, scores, draws, np.ascontiguousarray(log_probs), state)

    # ------------------------------------------------------------------ choice
    def choose(self, analysis: MoveAnalysis) -> chess.Move:
        if self.temperature is None:
            return analysis.best()
        logits = analysis.scores / self.temperature
        probs = np.exp(logits - logits.max())
        return analysis.moves[int(self.rng.choice(len(probs), p=probs / probs.sum()))]

    def play(self, board: chess.Board) -> chess.Move:
        return self.choose(self.analyse(board))


# ----------------------------------------------------------------------------- SVG
def _value_colour(p: float) -> str:
    """Red (losing) -> yellow -> green (winning), with some transparency for the arrows."""
    p = min(max(p, 0.0), 1.0)
    red, green = (255, int(510 * p)) if p < 0.5 else (int(510 * (1 - p)), 200)
    return f"#{red:02x}{green:02x}30cc"


def board_svg(board: chess.Board, analysis: MoveAnalysis, *, top: int = 5, size: int = 400) -> str:
    """An SVG of ``board`` with arrows for the model's ``top`` moves (coloured by win probability) and a
    side panel listing every ranked move with its value."""
    import chess.svg

    if analysis.fen != board.fen():
        raise ValueError(f"the analysis is of {analysis.fen}, not of the board {board.fen()}; analyse this board first")
    ranked = analysis.ranked()
    bc = analysis.policy == "behavioral_cloning"  # scores are log-probs: show probabilities
    arrows = [chess.svg.Arrow(m.from_square, m.to_square, color=_value_colour(float(np.exp(s)) if bc else s)) for m, s in ranked[:top]]
    inner = chess.svg.board(board, arrows=arrows, size=size, lastmove=board.peek() if board.move_stack else None)
    inner = inner.split("?>", 1)[-1]  # drop any XML declaration so it can be nested
    row, panel_width = 16, 190
    height = max(size, row * (len(ranked) + 3))
    label = "P(move)" if bc else "win %"
    lines = [f'<text x="{size + 12}" y="{row}" font-family="monospace" font-size="13" font-weight="bold">move   {label}</text>']
    for i, (move, score) in enumerate(ranked):
        value = float(np.exp(score)) if bc else score
        draw = " (rep)" if analysis.repetition_draw[analysis.moves.index(move)] else ""
        lines.append(f'<text x="{size + 12}" y="{row * (i + 2)}" font-family="monospace" font-size="12" fill="'
                     f'{_value_colour(value)[:7]}">{html.escape(board.san(move)):<7}{100 * value:6.2f}{draw}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            f'width="{size + panel_width}" height="{height}" viewBox="0 0 {size + panel_width} {height}">'
            f'<rect width="100%" height="100%" fill="white"/>{inner}{"".join(lines)}</svg>')
