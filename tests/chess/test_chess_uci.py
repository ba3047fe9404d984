import io
import sys
import threading

import chess
import chess.engine

from zoo.chess.uci import UCIProtocol, play_terminal, win_prob_to_centipawns


def test_uci_engine_plays_a_full_legal_game_against_stockfish(tiny_av_dir):
    command = [sys.executable, "-m", "zoo.cli", "chess", "uci", str(tiny_av_dir), "--threads", "1"]
    with chess.engine.SimpleEngine.popen_uci(command, timeout=120) as model, chess.engine.SimpleEngine.popen_uci("/usr/games/stockfish") as sf:
        assert model.id["name"] == f"zoo-chess {tiny_av_dir}" and "Threads" in model.options
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


def _protocol(engine, out, **kwargs):
    return UCIProtocol("tiny", out, load=lambda name: engine, **kwargs)


def _session(engine, lines, **kwargs):
    out = io.StringIO()
    protocol = _protocol(engine, out, **kwargs)
    protocol.loop(io.StringIO("\n".join(lines) + "\n"))
    return out.getvalue().splitlines(), protocol


def test_uci_protocol_details(tiny_av):
    engine = tiny_av.engine()
    lines, protocol = _session(engine, ["uci", "isready", "position startpos moves e2e4 e7e5", "go depth 1",
                                        "bogus", "quit", "isready"], threads=1)
    assert lines[:2] == ["id name zoo-chess tiny", "id author zoo (ChessBench transformer, searchless)"]
    assert lines[2:6] == ["option name Threads type spin default 1 min 1 max 512",
                          "option name Move Overhead type spin default 10 min 0 max 5000",
                          "option name MultiPV type spin default 1 min 1 max 500",
                          "option name Model type string default tiny"]
    assert lines[6:8] == ["uciok", "readyok"]
    board = chess.Board()
    board.push_uci("e2e4")
    board.push_uci("e7e5")
    best = engine.play(board)
    assert lines[9] == f"bestmove {best.uci()}" and lines[8].endswith(f"pv {best.uci()}")
    assert "unknown command" in lines[10]
    assert "readyok" not in lines[11:]  # nothing after quit
    mated, _ = _session(engine, ["position fen rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3", "go"])
    assert mated == ["bestmove 0000"]


def test_a_bad_position_is_reported_and_never_played_from(tiny_av):
    lines, protocol = _session(tiny_av.engine(), ["position startpos moves e2e4", "position startpos moves e2e5",
                                                  "go movetime 1000", "position startpos moves e2e4", "go movetime 1000"])
    assert lines[0] == "info string error: illegal move e2e5 in " + chess.Board().fen()
    assert lines[1].startswith("info string error: no position to play") and lines[2] == "bestmove 0000"
    assert protocol.board.fen() == chess.Board("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1").fen()
    assert lines[-1].startswith("bestmove ") and lines[-1] != "bestmove 0000"  # a good position plays again
    bad_go, _ = _session(tiny_av.engine(), ["go movetime soon", "go searchmoves e2e5"])
    assert bad_go == ["info string error: go movetime needs an integer, got 'soon'", "bestmove 0000",
                      f"info string error: searchmoves: e2e5 is not legal in {chess.Board().fen()}", "bestmove 0000"]


def test_multipv_through_python_chess(tiny_av, tiny_av_dir):
    """python-chess's analyse(multipv=N) over the real command: N lines, best first, each the engine's own value."""
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3")
    expected = tiny_av.engine().analyse(board).ranked()
    command = [sys.executable, "-m", "zoo.cli", "chess", "uci", str(tiny_av_dir), "--threads", "1"]
    with chess.engine.SimpleEngine.popen_uci(command, timeout=120) as model:
        assert model.options["MultiPV"].default == 1 and model.options["MultiPV"].max == 500
        infos = model.analyse(board, chess.engine.Limit(time=5), multipv=4)
        single = model.analyse(board, chess.engine.Limit(time=5))  # back to one line
        everything = model.analyse(board, chess.engine.Limit(time=5), multipv=500)
    assert [info["multipv"] for info in infos] == [1, 2, 3, 4]
    assert [info["pv"] for info in infos] == [[move] for move, _ in expected[:4]]
    assert [info["score"].white().score() for info in infos] == [-win_prob_to_centipawns(v) for _, v in expected[:4]]
    assert single["pv"] == [expected[0][0]] and "multipv" not in single
    assert len(everything) == board.legal_moves.count()  # capped at the legal moves


def test_multipv_lines_with_a_time_limit_and_a_temperature(tiny_av):
    from zoo.chess.engine import ChessEngine

    clock = FakeClock()
    engine = _slow_engine(tiny_av, clock, 0.01)  # 20 moves at the start: 0.2 s for all of them
    lines, protocol = _session(engine, ["setoption name MultiPV value 30", "isready", "go movetime 100",
                                        "setoption name MultiPV value 0", "go", "setoption name MultiPV value x"],
                               clock=clock)
    info = [line for line in lines if line.startswith("info depth")]
    valued = int(info[0].split(" nodes ")[1].split()[0])
    assert 1 <= valued < 20 and [int(line.split()[4]) for line in info[:valued]] == list(range(1, valued + 1))
    assert info[valued] == info[-1] and " multipv " not in info[-1]  # MultiPV 0 is taken as 1
    assert lines[-1] == "info string error: option 'multipv' needs an integer, got 'x'"
    # sampled at a temperature, the played move need not be the best valued: it is line 1 all the same
    best = tiny_av.engine().play(chess.Board()).uci()
    sampled = ChessEngine(tiny_av, temperature=10.0, seed=0)
    played = (_session(sampled, ["setoption name MultiPV value 3", "go"])[0] for _ in range(10))
    lines = next(lines for lines in played if lines[-1] != f"bestmove {best}")  # nearly always the first
    assert [line.split()[4] for line in lines[:3]] == ["1", "2", "3"]
    assert lines[0].split(" pv ")[1] == lines[-1].removeprefix("bestmove ") != best


def test_uciok_comes_before_the_model_is_loaded(tiny_av):
    release, out = threading.Event(), io.StringIO()

    def slow_load(name):
        release.wait(60)
        return tiny_av.engine()

    protocol = UCIProtocol("tiny", out, load=slow_load)
    protocol.handle("uci")
    assert out.getvalue().splitlines()[-1] == "uciok" and protocol._engine is None  # the load is still waiting
    release.set()
    protocol.handle("isready")
    assert out.getvalue().splitlines()[-1] == "readyok" and protocol._engine is not None


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _slow_engine(module, clock, seconds_per_row):
    """The tiny model's engine, on a clock that advances by a fixed cost per network row."""
    from zoo.chess.engine import ChessEngine

    class SlowEngine(ChessEngine):
        def last_log_probs(self, sequences):
            clock.now += seconds_per_row * len(sequences)
            return super().last_log_probs(sequences)

    return SlowEngine(module)


def test_go_values_only_what_fits_in_the_time_limit(tiny_av):
    from zoo.chess.engine import legal_moves

    clock = FakeClock()
    engine = _slow_engine(tiny_av, clock, 0.01)  # 20 legal moves at the start: 0.2 s for all of them
    out = io.StringIO()
    protocol = _protocol(engine, out, clock=clock)
    protocol.handle("isready")
    board = chess.Board()
    full = engine.analyse(board)
    for go, budget in (("go movetime 100", 0.1), ("go wtime 3000 btime 9000", 0.1), ("go btime 100 wtime 1500 winc 10", 0.06)):
        start = clock.now
        protocol.handle("position startpos")
        protocol.handle(go)
        info, answer = out.getvalue().splitlines()[-2:]
        assert 0 < clock.now - start <= budget, go  # the reply comes within the limit, overhead included
        valued = int(info.split(" nodes ")[1].split()[0])
        assert 1 <= valued < 20
        # the best of the moves it had time for (quiet start position: the first in the official order)
        first = legal_moves(board)[:valued]
        best = max(first, key=lambda m: full.scores[full.moves.index(m)])
        assert answer == f"bestmove {best.uci()}"
    protocol.handle("go movetime 1000")  # time for every move: the engine's own choice
    assert out.getvalue().splitlines()[-1] == f"bestmove {full.best().uci()}"
    protocol.handle("go searchmoves g1f3 b1c3")
    pick = max(["g1f3", "b1c3"], key=lambda u: full.scores[full.moves.index(chess.Move.from_uci(u))])
    assert out.getvalue().splitlines()[-1] == f"bestmove {pick}"


def test_infinite_and_ponder_wait_for_stop_and_ponderhit(tiny_av):
    engine = tiny_av.engine()
    best = engine.play(chess.Board()).uci()
    lines, _ = _session(engine, ["go infinite", "isready", "stop", "go ponder", "ponderhit", "stop"])
    assert lines[0].startswith("info depth 1") and lines[1:3] == ["readyok", f"bestmove {best}"]
    assert lines[3].startswith("info depth 1") and lines[4:] == [f"bestmove {best}"]  # one answer per go


def test_options_threads_overhead_and_model(tiny_av, tiny_av_dir):
    import torch

    before = torch.get_num_threads()
    loaded = []

    def load(name):
        if name == "missing":
            raise FileNotFoundError("missing is not a folder")
        loaded.append(name)
        return tiny_av.engine()

    out = io.StringIO()
    protocol = UCIProtocol("tiny", out, load=load)
    try:
        for line in ("setoption name Threads value 1", "setoption name Move Overhead value 25", "isready"):
            protocol.handle(line)
        assert torch.get_num_threads() == 1 and protocol.overhead_ms == 25
        for line in ("setoption name Threads value many", "setoption name Hash value 16", "setoption name Model value missing",
                     "isready", "setoption name Model value other", "isready"):
            protocol.handle(line)
    finally:
        torch.set_num_threads(before)
    lines = out.getvalue().splitlines()
    assert lines[0] == "readyok"
    assert lines[1] == "info string error: option 'threads' needs an integer, got 'many'"
    assert lines[2] == "info string error: unknown option 'hash' (or no value)"
    assert lines[3:5] == ["info string error: missing is not a folder; still playing tiny", "readyok"]
    assert lines[5] == "readyok" and loaded == ["tiny", "other"] and protocol.name == "other"


def test_uci_command_rejects_an_unknown_model_before_the_protocol(capsys):
    from zoo.cli import main

    assert main(["chess", "uci", "chess-smal-av"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Did you mean: chess-small-av" in captured.err


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
