import numpy as np
import pytest
from chess_testdata import load_json

from zoo.chess.tokenizer import (
    ACTIONS,
    FEN_LENGTH,
    NUM_ACTIONS,
    VOCAB,
    action_index,
    bucket_values,
    mate_win_probability,
    square_token_index,
    to_bucket,
    tokenize,
    win_probability,
)


def test_tokens_match_official():
    data = load_json("tokenizer.json")
    assert list(VOCAB) == data["vocab"] and data["sequence_length"] == FEN_LENGTH
    for case in data["cases"]:
        tokens = tokenize(case["fen"])
        assert tokens.dtype == np.uint8 and tokens.shape == (77,)
        assert tokens.tolist() == case["tokens"], case["fen"]
        assert "".join(VOCAB[t] for t in tokens) == "".join(case["chars"])


@pytest.mark.parametrize("case", load_json("tokenizer.json")["invalid_cases"], ids=lambda c: c["fen"][-20:])
def test_invalid_fens_raise_value_error(case):
    with pytest.raises(ValueError, match="invalid FEN"):
        tokenize(case["fen"])


@pytest.mark.parametrize(
    "fen, problem",
    [
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN w KQkq - 0 1", "covers 7 squares"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1", "side to move"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq e4 0 1", "en-passant"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKXNR w KQkq - 0 1", "'X'"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - -1 1", "halfmove"),
    ],
)
def test_malformed_fen_names_the_problem(fen, problem):
    with pytest.raises(ValueError, match=problem):
        tokenize(fen)


def test_action_table_is_the_official_order():
    assert list(ACTIONS) == load_json("actions.json")
    assert NUM_ACTIONS == 1968
    anchors = {0: "a1b1", 99: "e1c1", 102: "e1g1", 317: "e2e4", 1714: "e8g8", 1791: "h8f7", 1792: "a2a1q", 1967: "h7g8n"}
    assert {i: ACTIONS[i] for i in anchors} == anchors
    assert all(action_index(a) == i for i, a in enumerate(ACTIONS))


@pytest.mark.parametrize("move", ["e2e5x", "e2", "0000", "a1a1", "e7e8k", None])
def test_bad_moves_raise_value_error(move):
    with pytest.raises(ValueError, match="action table"):
        action_index(move)


def test_win_probabilities_and_buckets_match_official():
    data = load_json("winprob.json")
    for case in data["centipawns"]:
        assert win_probability(case["cp"]) == case["win_prob"]  # exact float64
        assert to_bucket(case["win_prob"]) == case["bucket"]
    for case in data["mates"]:
        assert mate_win_probability(case["mate"]) == case["win_prob"]
        assert to_bucket(case["win_prob"]) == case["bucket"]
    for case in data["bucket_cases"]:
        assert to_bucket(case["win_prob"]) == case["bucket"], case
    values = bucket_values(data["num_buckets"])
    assert [values[0], values[1], values[-1]] == data["bucket_values_first_last"]
    assert to_bucket(np.array([0.0, 0.5, 0.5 + 1e-12, 1.0])).tolist() == [0, 63, 64, 127]
    with pytest.raises(ValueError):
        to_bucket(1.5)


def test_square_token_index_finds_every_square_of_the_board():
    import chess

    fen = "r3k2r/pp3ppp/2n5/3pP3/8/5N2/PPP2PPP/R3K2R w KQkq d6 0 12"
    tokens, board = tokenize(fen), chess.Board(fen)
    for square in chess.SQUARES:
        piece = board.piece_at(square)
        assert VOCAB[tokens[square_token_index(square)]] == (piece.symbol() if piece else "."), chess.square_name(square)
    assert sorted(square_token_index(np.arange(64)).tolist()) == list(range(1, 65))  # arrays too: the board's 64 slots
