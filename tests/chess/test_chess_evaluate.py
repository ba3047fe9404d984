import io
import math

import chess
import chess.engine
import chess.pgn
import numpy as np
import pytest
from chess_testdata import FIXTURES, load_json

from zoo.chess.evaluate import elo_difference, evaluate_puzzle, play_match, puzzle_accuracy, read_puzzles, static_metrics


def test_static_metrics_match_official(tiny_av):
    reference = load_json("metrics/metrics.json")
    official = reference["models"]["model_av_tiny"]
    averages, per_fen = static_metrics(tiny_av.engine(), FIXTURES / "metrics" / "test_action_value.bag")
    assert averages["num_dropped_fens"] == 1 and averages["num_fens"] == len(official["per_fen"])
    for key, value in official["averages"].items():
        assert averages[key] == pytest.approx(value, abs=1e-5), key
    by_fen = {r["fen"]: r for r in official["per_fen"]}
    assert reference["dropped_fen"] not in {r["fen"] for r in per_fen}
    for ours in per_fen:
        theirs = by_fen[ours["fen"]]
        assert ours["action_accuracy"] == theirs["action_accuracy"]
        assert ours["kendall_tau"] == pytest.approx(theirs["kendall_tau"], abs=1e-12)  # official argsort variant
        for key in ("output_log_loss", "entropy", "l2_win_prob_loss"):
            assert ours[key] == pytest.approx(theirs[key], abs=1e-5), key
        assert -1 <= ours["kendall_tau_values"] <= 1


def test_lichess_puzzles_match_official_verdicts(tiny_av):
    engine = tiny_av.engine()
    for puzzle in load_json("puzzles_av_tiny.json")["puzzles"]:
        board = chess.pgn.read_game(io.StringIO(puzzle["PGN"])).end().board()
        solved, played = evaluate_puzzle(engine, board, puzzle["Moves"].split())
        assert solved == puzzle["correct"], puzzle["kind"]
        # the official engine's choice at each of our turns along the listed line
        moves = puzzle["Moves"].split()
        line = board.copy()
        choices = []
        for i, text in enumerate(moves):
            if i % 2 == 1:
                choices.append(engine.play(line).uci())
            line.push_uci(text)
        assert choices == puzzle["engine_moves_at_our_turns"]
        assert played == choices[: len(played)]


def test_puzzle_csv_round_trip(tiny_av, tmp_path):
    puzzles = load_json("puzzles_av_tiny.json")["puzzles"]
    path = tmp_path / "puzzles.csv"
    import csv

    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["PGN", "Moves", "Rating"])
        writer.writeheader()
        writer.writerows({k: p[k] for k in ("PGN", "Moves", "Rating")} for p in puzzles)
    result = puzzle_accuracy(tiny_av.engine(), path)
    assert result["accuracy"] == pytest.approx(np.mean([p["correct"] for p in puzzles]))
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="columns"):
        read_puzzles(tmp_path / "bad.csv")


class _StockfishSolver:
    """A reference solver for the composed problems: Stockfish at depth 10 finds every mate."""

    def __init__(self, engine):
        self.engine = engine

    def play(self, board):
        return self.engine.play(board, chess.engine.Limit(depth=10)).move


def test_pychess_mate_in_n_problems(tiny_av):
    puzzles = read_puzzles(FIXTURES / "pychess_mate_in_2_sample.pgn") + read_puzzles(FIXTURES / "pychess_mate_in_3_sample.pgn")
    assert len(puzzles) == 5 and all(p.engine_first for p in puzzles)
    assert puzzles[0].moves == ["d5f6", "g7f6", "c4f7"]
    with chess.engine.SimpleEngine.popen_uci("/usr/games/stockfish") as sf:
        solver = _StockfishSolver(sf)
        assert all(evaluate_puzzle(solver, p.board, p.moves, engine_first=True)[0] for p in puzzles)
    # the tiny model: a first move off the solution line solves the problem only if it mates at once
    p = puzzles[0]
    solved, played = evaluate_puzzle(tiny_av.engine(), p.board, p.moves, engine_first=True)
    if played[0] != p.moves[0]:
        after = p.board.copy()
        after.push_uci(played[0])
        assert len(played) == 1 and solved == after.is_checkmate()
    else:
        assert len(played) == 2


def test_elo_difference():
    elo, err = elo_difference(6, 2, 2)
    assert elo == pytest.approx(-400 * math.log10(1 / 0.7 - 1))
    assert 0 < err < 400
    assert elo_difference(5, 0, 5)[0] == pytest.approx(0.0)
    assert elo_difference(3, 0, 0) == (math.inf, math.inf)
    with pytest.raises(ValueError):
        elo_difference(0, 0, 0)


@pytest.mark.slow
def test_match_against_stockfish_writes_pgn(tiny_av, tmp_path):
    from zoo.chess.make_data import default_book

    result = play_match(tiny_av.engine(), games=2, skill_level=0, nodes=50, book=default_book(), opening_plies=4, max_plies=60, pgn_path=tmp_path / "m.pgn")
    summary = result.summary()
    assert summary["games"] == 2 == summary["wins"] + summary["draws"] + summary["losses"]
    with open(tmp_path / "m.pgn") as f:
        games = [chess.pgn.read_game(f), chess.pgn.read_game(f)]
    assert games[0].headers["White"] == "zoo-chess" and games[1].headers["Black"] == "zoo-chess"
    # both games of a pair start from the same book opening
    first = [m.uci() for m in games[0].mainline_moves()][:4]
    assert first == [m.uci() for m in games[1].mainline_moves()][:4]
    for game in games:
        board = game.board()
        for move in game.mainline_moves():
            assert move in board.legal_moves
            board.push(move)


def test_simple_opponents():
    from zoo.chess.evaluate import MaterialGreedy, RandomMover

    greedy = MaterialGreedy(seed=1)
    hanging_queen = chess.Board("4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1")
    assert greedy.play(hanging_queen).uci() == "d2d5"
    mate_in_one = chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1")
    assert greedy.play(mate_in_one).uci() == "a1a8"
    board = chess.Board()
    assert RandomMover(seed=3).play(board) == RandomMover(seed=3).play(board)
    assert RandomMover(seed=3).play(board) in board.legal_moves


def test_match_against_random_mover(tiny_av, tmp_path):
    from zoo.chess.evaluate import RandomMover

    result = play_match(tiny_av.engine(), RandomMover(seed=0), games=2, max_plies=12, pgn_path=tmp_path / "r.pgn")
    assert result.wins + result.draws + result.losses == 2
    summary = result.summary()
    assert (summary["elo"] is None) == (summary["score"] in (0.0, 1.0))
    assert (tmp_path / "r.pgn").read_text().count("[Event \"zoo-chess vs random mover\"]") == 2


def test_adjudication_follows_the_official_threshold():
    from zoo.chess.evaluate import StockfishPlayer, _adjudicate

    with StockfishPlayer(skill_level=None, nodes=None) as judge:
        assert _adjudicate(judge.engine, chess.Board(), 0.01) is None  # the start position is level
        queen_and_rook_up = chess.Board("4k3/8/8/8/8/8/3QR3/4K3 b - - 0 1")
        winner, reason = _adjudicate(judge.engine, queen_and_rook_up, 0.05)
        assert winner == chess.WHITE and reason.startswith(("+", "mate"))
        back_rank = chess.Board("r5k1/8/8/8/8/8/5PPP/6K1 b - - 0 1")  # Ra1 mates
        assert _adjudicate(judge.engine, back_rank, 0.01) == (chess.BLACK, "mate in 1")


def test_matches_are_adjudicated_like_the_official_tournament(tmp_path):
    from zoo.chess.evaluate import MaterialGreedy, RandomMover

    adjudicated = play_match(MaterialGreedy(seed=0), RandomMover(seed=0), games=2, max_plies=200, pgn_path=tmp_path / "a.pgn")
    assert adjudicated.wins == 2  # greedy wins material from a random mover long before 200 plies
    assert adjudicated.summary()["adjudicated"] == 2
    with open(tmp_path / "a.pgn") as f:
        games = [chess.pgn.read_game(f) for _ in range(2)]
    for game in games:
        assert game.headers["Termination"].startswith("adjudicated: Stockfish")
        assert not game.end().board().is_game_over()
    played_out = play_match(MaterialGreedy(seed=0), RandomMover(seed=0), games=2, max_plies=40, adjudication_time=None,
                            pgn_path=tmp_path / "b.pgn")
    assert "adjudicated: Stockfish" not in (tmp_path / "b.pgn").read_text()
    assert played_out.wins + played_out.draws + played_out.losses == 2 and played_out.adjudicated == 0


def test_match_command_records_the_rule_it_played_under(tiny_av_dir, tmp_path):
    import json

    from zoo.cli import main

    rules = {}
    for label, flags in {"official": [], "explicit": ["--adjudication-time", "0.02"], "off": ["--no-adjudication"]}.items():
        out = tmp_path / f"{label}.json"
        assert main(["chess", "match", str(tiny_av_dir), "--opponent", "random", "--games", "2", "--max-plies", "8",
                     "--json", str(out), *flags]) == 0
        summary = json.loads(out.read_text())
        assert summary["games"] == 2 and summary["max_plies"] == 8
        rules[label] = summary["adjudication_time"]
    assert rules == {"official": 0.01, "explicit": 0.02, "off": None}
