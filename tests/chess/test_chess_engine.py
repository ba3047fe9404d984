import chess
import numpy as np
import pytest
import torch
from chess_testdata import TINY, engine_positions as _boards

from zoo.chess.engine import board_svg, legal_moves, parse_move
from zoo.chess.module import ChessTransformerModule


def test_action_value_engine_matches_official(tiny_av):
    positions, boards = _boards()
    engine = tiny_av.engine(batch_size=7)  # odd chunks: results must not depend on batching
    for pos, board, analysis in zip(positions, boards, engine.analyse_many(boards)):
        assert [m.uci() for m in analysis.moves] == pos["legal_moves"]
        assert np.abs(analysis.win_probs - pos["win_probs"]).max() < 1e-6, pos["id"]
        assert np.abs(analysis.scores - pos["scores"]).max() < 1e-6, pos["id"]
        assert analysis.repetition_draw.tolist() == pos["repetition_draw"], pos["id"]
        assert analysis.best().uci() == pos["chosen_move"], pos["id"]
        assert board.fen() == pos["fen"]  # analysis leaves the board as it was
    assert engine.play(boards[-1]).uci() == positions[-1]["chosen_move"]  # the repetition override changes this one


def test_batched_equals_single_position(tiny_av):
    _, boards = _boards()
    boards = boards[:2] + boards[-2:]
    together = tiny_av.engine(batch_size=4096).analyse_many(boards)
    for board, analysis in zip(boards, together):
        alone = tiny_av.engine(batch_size=1).analyse(board)
        np.testing.assert_allclose(alone.win_probs, analysis.win_probs, atol=1e-6)


def _random_module(policy):
    torch.manual_seed(1)
    return ChessTransformerModule(policy=policy, **TINY).eval()


def test_state_value_engine_flips_child_buckets():
    module = _random_module("state_value")
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    engine = module.engine()
    analysis = engine.analyse(board)
    from zoo.chess.tokenizer import bucket_values, tokenize

    move = analysis.moves[3]
    board.push(move)
    row = np.concatenate([tokenize(board.fen()), [0]])[None].astype(np.int64)
    board.pop()
    log_probs = engine.last_log_probs(row)[0]
    values = bucket_values()
    assert analysis.win_probs[3] == pytest.approx(float(np.exp(log_probs[::-1]) @ values), abs=1e-12)
    assert analysis.win_probs[3] == pytest.approx(1 - float(np.exp(log_probs) @ values), abs=1e-5)
    assert 0 <= analysis.state_win_prob <= 1


def test_behavioural_cloning_renormalises_over_legal_moves():
    module = _random_module("behavioral_cloning")
    board = chess.Board()
    analysis = module.engine().analyse(board)
    assert len(analysis.moves) == 20
    assert np.exp(analysis.scores).sum() == pytest.approx(1.0)
    assert analysis.best() == analysis.moves[int(np.argmax(analysis.scores))]


def test_temperature_sampling_is_seeded(tiny_av):
    board = chess.Board()
    a = [tiny_av.engine(temperature=0.05, seed=5).play(board) for _ in range(3)]
    b = [tiny_av.engine(temperature=0.05, seed=5).play(board) for _ in range(3)]
    assert a == b
    with pytest.raises(ValueError, match="temperature"):
        tiny_av.engine(temperature=0)


def test_parse_move_and_game_over(tiny_av):
    board = chess.Board()
    assert parse_move(board, "e2e4") == parse_move(board, "e4")
    with pytest.raises(ValueError, match="not legal"):
        parse_move(board, "e2e5")
    with pytest.raises(ValueError, match="neither"):
        parse_move(board, "castle!")
    mate = chess.Board("rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3")
    with pytest.raises(ValueError, match="no legal moves"):
        tiny_av.engine().play(mate)
    assert [m.uci() for m in legal_moves(board)][:4] == ["b1a3", "b1c3", "g1f3", "g1h3"]


def test_board_svg_lists_every_move(tiny_av):
    board = chess.Board()
    analysis = tiny_av.engine().analyse(board)
    svg = board_svg(board, analysis)
    assert svg.startswith("<svg") and svg.count("<text") == 21 and "h4" in svg
    board.push_uci("e2e4")
    with pytest.raises(ValueError, match="analyse this board"):
        board_svg(board, analysis)


def test_repetition_rule_shortcut_agrees_with_python_chess():
    """The halfmove-clock shortcut of the repetition rule gives python-chess's answer, in games that shuffle
    pieces back and forth (many repetitions) and in ordinary random ones."""
    import random

    from zoo.chess.engine import _is_repetition_draw

    rng = random.Random(3)
    checked, draw_clocks = 0, []
    for game in range(12):
        board = chess.Board()
        for _ in range(rng.randint(10, 50)):
            moves = list(board.legal_moves)
            if not moves:
                break
            # shuffling games: prefer undoing the mover's previous move, which repeats positions
            undo = [m for m in moves if len(board.move_stack) >= 2 and m.from_square == board.move_stack[-2].to_square
                    and m.to_square == board.move_stack[-2].from_square]
            board.push(rng.choice(undo) if undo and game % 2 and rng.random() < 0.8 else rng.choice(moves))
            for move in legal_moves(board):
                board.push(move)
                expected = board.is_fivefold_repetition() or board.can_claim_threefold_repetition()
                assert _is_repetition_draw(board) == expected, board.fen()
                checked += 1
                draw_clocks += [board.halfmove_clock] if expected else []
                board.pop()
    # draws at the smallest clock possible (7: a claim by the mover's next move) show the bound is not too high
    assert len(draw_clocks) >= 10 and min(draw_clocks) == 7 and checked > 4000, (draw_clocks, checked)
