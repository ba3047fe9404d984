"""Paths and loaders for the chess fixtures (official outputs, see tests/fixtures/chess/README.md)."""

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chess"
TINY = dict(num_layers=2, embedding_dim=32, num_heads=4)  # a CPU-sized ChessTransformer (the official sizes: catalog)


def load_json(name: str):
    return json.loads((FIXTURES / name).read_text())


def engine_positions():
    """The official engine fixture's positions and their boards (start FEN plus the moves played)."""
    import chess

    data = load_json("engine_av_tiny.json")
    boards = []
    for pos in data["positions"]:
        board = chess.Board(pos["start_fen"])
        for move in pos["moves"]:
            board.push_uci(move)
        assert board.fen() == pos["fen"]
        boards.append(board)
    return data["positions"], boards
