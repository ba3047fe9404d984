"""Paths and loaders for the chess fixtures (official outputs, see tests/fixtures/chess/README.md)."""

import json
from pathlib import Path

import numpy as np
import torch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chess"
TINY = dict(num_layers=2, embedding_dim=32, num_heads=4)  # a CPU-sized ChessTransformer (the official sizes: catalog)


def load_json(name: str):
    return json.loads((FIXTURES / name).read_text())


def official_io():
    """The official tiny action-value model's inputs and outputs (``model_av_tiny/io.npz``)."""
    return np.load(FIXTURES / "model_av_tiny" / "io.npz")


def last_log_prob_error(model) -> float:
    """How far ``model``'s last-position log-probs on the official inputs are from the official tiny model's."""
    io = official_io()
    with torch.no_grad():
        out = model(torch.from_numpy(io["sequences"]).long())[:, -1]
    return (out - torch.from_numpy(io["log_probs"])).abs().max().item()


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
