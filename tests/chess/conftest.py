"""Shared fixtures of the chess tests: the official tiny checkpoint, converted once per session."""

from pathlib import Path

import pytest
from chess_testdata import FIXTURES


@pytest.fixture(scope="session")
def tiny_av_dir(tmp_path_factory) -> Path:
    """The official tiny action-value checkpoint converted from its params.npz into a zoo repo folder."""
    from zoo.chess.convert import convert

    out = tmp_path_factory.mktemp("tiny_av")
    convert(FIXTURES / "model_av_tiny" / "params.npz", out, num_heads=4, policy="action_value")
    return out


@pytest.fixture(scope="session")
def tiny_av(tiny_av_dir):
    import zoo

    return zoo.load(tiny_av_dir)


@pytest.fixture(scope="session")
def generated_data(tmp_path_factory) -> Path:
    """A few Stockfish-annotated games written by make-data (depth 2, short games)."""
    from zoo.chess.make_data import DataConfig, default_book, make_data

    out = tmp_path_factory.mktemp("chess_data")
    cfg = DataConfig(num_games=4, depth=2, selfplay_depth=1, max_plies=8, max_book_plies=4, test_fraction=0.3, seed=3, book=default_book())
    make_data(out, cfg, workers=2, progress=False)
    return out
