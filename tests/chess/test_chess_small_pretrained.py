"""The bundled chess-small-av, -bc and -sv, loaded offline: they rank held-out moves above chance, play
legal moves, and `zoo chess uci NAME` serves them by name."""

import sys

import chess
import chess.engine
import numpy as np
import pytest

import zoo
from zoo.chess.evaluate import read_action_value_test_set, static_metrics

from chess_testdata import FIXTURES

# the first 120 positions of the mini-ChessBench test split (held-out games), every legal move at depth 8
HELD_OUT = FIXTURES / "mini_chessbench_test120.bag"

# measured on HELD_OUT when the models were published: (action accuracy, value-based Kendall tau)
MEASURED = {"chess-small-av": (0.225, 0.354), "chess-small-bc": (0.200, 0.172), "chess-small-sv": (0.233, 0.086)}


@pytest.fixture(scope="module")
def held_out_chance():
    data, dropped = read_action_value_test_set(HELD_OUT)
    assert len(data) == 120 and not dropped
    # a uniformly random move is a best move with probability (#best moves) / (#legal moves)
    return float(np.mean([np.mean(table[:, 1] == table[:, 1].max()) for table in data.values()]))


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_bundled_model_ranks_held_out_moves_above_chance(name, held_out_chance, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # embedded: no network, no cache needed
    averages, _ = static_metrics(zoo.load(name).engine(), HELD_OUT)
    accuracy, tau = MEASURED[name]
    # the same weights and positions give the same numbers up to float summation order
    assert averages["eval_action_accuracy"] == pytest.approx(accuracy, abs=1 / 120 + 1e-9)
    assert averages["eval_kendall_tau_values"] == pytest.approx(tau, abs=0.01)
    # and they are real skill: an untrained model scores the chance rate (0.107 here: few legal moves, ties) and a
    # tau near zero; chess-small-bc's tau is the lowest here (0.17), chess-small-sv's accuracy 0.13 above chance
    assert averages["eval_action_accuracy"] > held_out_chance + 0.02, held_out_chance
    assert averages["eval_kendall_tau_values"] > 0.05


@pytest.mark.parametrize("name", ["chess-small-av", "chess-small-sv"])
def test_model_takes_a_hanging_queen(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    board = chess.Board("r1b1kbnr/pppp1ppp/2n5/4p3/3qP3/2N2N2/PPPP1PPP/R1BQKB1R w KQkq - 0 5")  # Nxd4 wins the queen
    analysis = zoo.load(name).engine().analyse(board)
    assert analysis.best() == chess.Move.from_uci("f3d4")
    # and it sees that a queen up is winning (0.88 and 0.87 when published; the next-best move 0.42 and 0.54)
    assert analysis.win_probs.max() > 0.8


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_uci_command_plays_the_bundled_model_offline(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    command = [sys.executable, "-m", "zoo.cli", "chess", "uci", name, "--threads", "1"]
    with chess.engine.SimpleEngine.popen_uci(command, timeout=120) as model:
        assert model.id["name"] == f"zoo-chess {name}"
        board = chess.Board()
        for _ in range(6):
            move = model.play(board, chess.engine.Limit(time=0.05)).move
            assert move in board.legal_moves
            board.push(move)
