import io
import sys

import chess
import chess.engine

from zoo.chess.uci import UCIProtocol, play_terminal, win_prob_to_centipawns


def test_uci_engine_plays_a_full_legal_game_against_stockfish(tiny_av_dir):
    command = [sys.executable, "-m", "zoo.cli", "chess", "uci", str(tiny_av_dir), "--threads", "1"]
    with chess.engine.SimpleEngine.popen_uci(command, timeout=120) as model, chess.engine.SimpleEngine.popen_uci("/usr/games/stockfish") as sf:
        assert model.id["name"] == f"zoo-chess {tiny_av_dir}"
        sf.configure({"Skill Level": 3})
        board = chess.Board()
        while not board.is_game_over(claim_draw=True) and len(board.move_stack) < 400:
            player = model if board.turn == chess.WHITE else sf
            limit = chess.engine.Limit(time=0.05) if player is model else chess.engine.Limit(depth=4)
            result = player.play(board, limit, info=chess.engine.INFO_SCORE)
            assert result.move in board.legal_moves
            board.push(result.move)
        model.ping()
    assert board.is_game_over(claim_draw=True)
    assert len(board.move_stack) >= 4


def _session(engine, lines):
    out = io.StringIO()
    protocol = UCIProtocol(engine, "tiny", out)
    protocol.loop(io.StringIO("\n".join(lines) + "\n"))
    return out.getvalue().splitlines(), protocol


def test_uci_protocol_details(tiny_av):
    engine = tiny_av.engine()
    lines, protocol = _session(engine, ["uci", "isready", "position startpos moves e2e4 e7e5", "go wtime 1000", "position startpos moves e2e5", "bogus", "quit", "isready"])
    assert lines[:4] == ["id name zoo-chess tiny", "id author zoo (ChessBench transformer, searchless)", "uciok", "readyok"]
    board = chess.Board()
    board.push_uci("e2e4")
    board.push_uci("e7e5")
    best = engine.play(board)
    assert lines[5] == f"bestmove {best.uci()}" and lines[4].endswith(f"pv {best.uci()}")
    assert "illegal move e2e5" in lines[6] and "unknown command" in lines[7]
    assert "readyok" not in lines[8:]  # nothing after quit
    assert protocol.board.fen() == board.fen()  # a bad position command keeps the previous position
    mated, _ = _session(engine, ["position fen rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3", "go"])
    assert mated == ["bestmove 0000"]


def test_centipawns_invert_the_win_probability():
    from zoo.chess.tokenizer import win_probability

    for cp in (-800, -35, 0, 120, 999):
        assert win_prob_to_centipawns(win_probability(cp)) == cp
    assert win_prob_to_centipawns(1.0) == -win_prob_to_centipawns(0.0) > 7000


def test_terminal_play(tiny_av):
    out = io.StringIO()
    board = play_terminal(tiny_av.engine(), stdin=io.StringIO("e4\nxx\nundo\nd2d4\nquit\n"), out=out)
    text = out.getvalue()
    assert "model plays" in text and "neither a UCI nor a SAN" in text and "game stopped" in text
    assert [m.uci() for m in board.move_stack][0] == "d2d4" and len(board.move_stack) == 2
