import json

import lightning as L
import numpy as np
import pytest
import torch
from chess_testdata import FIXTURES, TINY, official_io
from training_checks import assert_training_order_resumes

import zoo
from zoo.cli import main
from zoo.chess.bag import BagReader, decode_record
from zoo.chess.data import ChessBagDataset, ChessDataModule, find_bag, mirror_record, record_to_sequence
from zoo.chess.module import BOARD_CHARACTERS, ChessTransformerModule, move_lookup_channels, square_factored_action_embeddings
from zoo.chess.tokenizer import ACTION_TO_INDEX, VOCAB, square_token_index, tokenize


def _trainer(**kwargs):
    return L.Trainer(accelerator="cpu", max_steps=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False, limit_val_batches=1, num_sanity_val_steps=0, gradient_clip_val=1.0, **kwargs)


def test_sequences_follow_the_official_layout():
    io = official_io()
    for fen, move, win_prob, expected in zip(io["fens"], io["moves"], io["win_probs"], io["sequences"]):
        sequence, p = record_to_sequence("action_value", (str(fen), str(move), float(win_prob)))
        assert sequence.tolist() == expected.tolist() and p == win_prob
    fen = "8/6pk/5p2/1p6/3R1P1p/n2K2PP/6N1/8 b - - 1 42"
    assert record_to_sequence("state_value", (fen, 0.5))[0].tolist() == tokenize(fen).tolist() + [63]
    assert record_to_sequence("behavioral_cloning", (fen, "e2e4"))[0].tolist() == tokenize(fen).tolist() + [317]


def test_square_factored_action_embeddings_share_squares_and_pieces():
    rows = square_factored_action_embeddings(64, torch.Generator().manual_seed(0))
    row = {move: rows[ACTION_TO_INDEX[move]] for move in ("e1e4", "e1e3", "e2e4", "e2e3", "a7a8q", "a7a8n", "b7b8q", "b7b8n")}
    # moves from one square differ only by their to-squares; promotions only by their pieces
    torch.testing.assert_close(row["e1e4"] - row["e1e3"], row["e2e4"] - row["e2e3"])
    torch.testing.assert_close(row["a7a8q"] - row["a7a8n"], row["b7b8q"] - row["b7b8n"])
    assert not torch.allclose(row["e1e4"], row["e2e4"])
    assert rows.shape == (1968, 64) and 0.9 < float(rows.std() * 64**0.5) < 1.1  # unit scale after x sqrt(D)
    module = ChessTransformerModule(num_layers=1, embedding_dim=32, num_heads=4, action_embedding_init="squares")
    assert 0.9 < float(module.model.token_embedding.weight.detach().std() * 32**0.5) < 1.1
    official = ChessTransformerModule(num_layers=1, embedding_dim=32, num_heads=4)
    assert float(official.model.token_embedding.weight.detach().std()) < 0.03  # the official truncated normal, std 0.02
    with pytest.raises(ValueError, match="action_embedding_init"):
        ChessTransformerModule(action_embedding_init="random")


def test_board_action_embeddings_carry_the_position_rows_of_their_squares():
    positions = torch.randn(64, 32)
    plain = square_factored_action_embeddings(32, torch.Generator().manual_seed(1))
    tied = square_factored_action_embeddings(32, torch.Generator().manual_seed(1), positions)
    e2e4 = ACTION_TO_INDEX["e2e4"]
    # same random parts (3 of 5 unit terms), plus the rows of e2 (square 12) and e4 (square 28)
    torch.testing.assert_close(tied[e2e4], (plain[e2e4] * 96**0.5 + positions[12] + positions[28]) / 160**0.5)
    modules = {}
    for init in ("squares", "board"):  # same seed: same position table and same random parts
        torch.manual_seed(0)
        modules[init] = ChessTransformerModule(num_layers=1, embedding_dim=32, num_heads=4, action_embedding_init=init)
    rows = modules["board"].model.position_embedding
    added = (modules["board"].model.token_embedding.weight * 160**0.5
             - modules["squares"].model.token_embedding.weight * 96**0.5)
    # e2's board token is input 2 + 6 * 8 + 4 (BOS, side to move, then a8..h1), e4's 2 + 4 * 8 + 4
    torch.testing.assert_close(added[e2e4], rows[54] + rows[38])


def test_move_square_lookup_starts_the_move_token_reading_its_from_and_to_pieces():
    import chess

    fen = "r3k2r/pp3ppp/2n5/3pP1n1/8/5N2/PPP2PPP/R3K2R w KQkq d6 0 12"
    board = chess.Board(fen)
    moves = [m for m in board.legal_moves if m.from_square not in (chess.A1, chess.B1)]  # rows shared with FEN chars
    sequences = torch.tensor(np.stack([record_to_sequence("action_value", (fen, m.uci(), 0.5))[0] for m in moves])).long()
    torch.manual_seed(0)
    module = ChessTransformerModule(num_layers=2, embedding_dim=64, num_heads=4, action_embedding_init="board",
                                    move_square_lookup=True)
    torch.manual_seed(0)
    plain = ChessTransformerModule(num_layers=2, embedding_dim=64, num_heads=4, action_embedding_init="board")
    model, D = module.model, 64
    with torch.no_grad():
        inputs = torch.nn.functional.pad(sequences[:, :-1], (1, 0))  # the BOS shift
        h = model.token_embedding(inputs) * D**0.5 + model.position_embedding[:79]  # (B, T, D)
        x = model.blocks[0].ln_attn(h)
        q, k = (proj(x).view(len(moves), 79, 4, 16).transpose(1, 2) for proj in (model.blocks[0].attn.q, model.blocks[0].attn.k))
        weights = torch.softmax(q @ k.transpose(-1, -2) / 4, -1)[:, :, -1]  # (B, H, T): from the move token
        update = model.blocks[0].attn(x)[:, -1]  # (B, D): what the first attention adds to the move token
    from_input = torch.tensor([1 + square_token_index(m.from_square) for m in moves])  # +1: the BOS shift
    to_input = torch.tensor([1 + square_token_index(m.to_square) for m in moves])
    assert weights[:, 0].argmax(-1).tolist() == from_input.tolist() and weights[:, 1].argmax(-1).tolist() == to_input.tolist()
    rows = torch.arange(len(moves))
    assert weights[rows, 0, from_input].min() > 0.25 and weights[rows, 1, to_input].min() > 0.25  # vs 1/79 uniform
    # the pieces found are copied: the nearest piece code to what lands in each channel group names the piece
    channels = move_lookup_channels(D)
    codes = model.token_embedding.weight[[VOCAB.index(c) for c in BOARD_CHARACTERS], channels["piece"]]  # (13, 8)
    def decoded(group):
        return [BOARD_CHARACTERS[i] for i in (update[:, channels[group]] @ codes.T).argmax(-1).tolist()]
    on = lambda square: board.piece_at(square).symbol() if board.piece_at(square) else "."
    assert decoded("captured") == [on(m.to_square) for m in moves]
    moving = [got == on(m.from_square) for got, m in zip(decoded("moving"), moves)]
    assert sum(moving) >= 0.75 * len(moves)  # a soft look-up: here the king's moves blur with the rook on a1
    assert decoded("captured").count("n") == 1  # Nxg5
    # only the start differs: the other heads and layers are the same draws
    torch.testing.assert_close(model.blocks[0].attn.q.weight[32:], plain.model.blocks[0].attn.q.weight[32:])
    torch.testing.assert_close(model.blocks[1].state_dict(), plain.model.blocks[1].state_dict())
    for bad in (dict(embedding_dim=32, num_heads=4), dict(embedding_dim=64, num_heads=4, policy="state_value")):
        with pytest.raises(ValueError, match="move-square look-up"):
            ChessTransformerModule(num_layers=1, move_square_lookup=True, **bad)


@pytest.mark.parametrize("policy", ["action_value", "state_value", "behavioral_cloning"])
def test_mirrored_records_are_the_same_position_for_the_other_colour(policy):
    import chess

    fen = "r3k2r/pp3ppp/2n5/3pP3/8/8/PPP2PPP/R3K2R w KQkq d6 0 12"
    record = {"action_value": (fen, "e5d6", 0.7), "state_value": (fen, 0.7), "behavioral_cloning": (fen, "e1c1")}[policy]
    mirrored = mirror_record(policy, record)
    assert mirrored[0] == "r3k2r/ppp2ppp/8/8/3Pp3/2N5/PP3PPP/R3K2R b KQkq d3 0 12"
    if policy != "state_value":  # en passant and castling stay legal, moved with the board
        assert chess.Move.from_uci(mirrored[1]) in chess.Board(mirrored[0]).legal_moves
        assert mirrored[1] == {"e5d6": "e4d3", "e1c1": "e8c8"}[record[1]]
    assert mirror_record(policy, mirrored) == record
    if policy != "behavioral_cloning":
        assert mirrored[-1] == record[-1]  # the mover's win probability


def test_mirror_augment_flips_about_half_the_training_samples(generated_data):
    data = ChessDataModule(str(generated_data), policy="action_value", mirror_augment=True)
    data.setup("fit")
    torch.manual_seed(0)
    plain = ChessBagDataset(find_bag(generated_data, "train", "action_value"), "action_value")
    flipped = sum(not torch.equal(data.train_set[i]["sequences"], plain[i]["sequences"]) for i in range(200))
    assert 70 < flipped < 130
    assert data.val_set is None or not data.val_set.mirror


def test_official_bag_dataset():
    ds = ChessBagDataset(FIXTURES / "bags" / "sample_action_value@2.bag", "action_value")
    assert len(ds) == 10 and ds[0]["sequences"].shape == (79,) and ds[0]["sequences"].dtype == torch.int64
    assert len(ChessBagDataset(FIXTURES / "bags" / "sample_state_value.bag", "state_value")[0]["sequences"]) == 78


def test_loaded_model_fine_tunes_on_generated_data(tiny_av_dir, generated_data):
    model = zoo.load(tiny_av_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    data = ChessDataModule(str(generated_data), policy="action_value", batch_size=16)
    trainer = _trainer()
    trainer.fit(model, datamodule=data)
    assert trainer.global_step == 3
    assert np.isfinite(trainer.callback_metrics["train_loss"].item())
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("policy", ["state_value", "behavioral_cloning"])
def test_other_policies_train_from_scratch(policy, generated_data):
    model = ChessTransformerModule(policy=policy, hl_gauss_sigma=0.75 if policy == "state_value" else None, **TINY)
    trainer = _trainer()
    trainer.fit(model, datamodule=ChessDataModule(str(generated_data), policy=policy, batch_size=8))
    assert "val_loss" in trainer.callback_metrics


@pytest.mark.slow  # spawns two processes (~30 s idle, minutes on a busy machine)
def test_ddp_spawn_two_cpu_processes(tiny_av_dir, generated_data, tmp_path):
    model = zoo.load(tiny_av_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = _trainer(strategy="ddp_spawn", devices=2, default_root_dir=str(tmp_path))
    trainer.fit(model, datamodule=ChessDataModule(str(generated_data), policy="action_value", batch_size=8))
    # the spawned workers' trained weights come back into this process's module
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    x = torch.randint(0, 31, (2, 79))
    with torch.no_grad():
        assert torch.isfinite(model.eval()(x)).all()


def test_generated_data_is_consistent(generated_data):
    import chess

    info = json.loads((generated_data / "info.json").read_text())
    keys = {}
    for split in ("train", "test"):
        fens = {}
        for raw in BagReader(find_bag(generated_data, split, "action_value")):
            fen, move, p = decode_record("action_value", raw)
            assert 0 <= p <= 1
            fens.setdefault(fen, set()).add(move)
        for fen, moves in fens.items():
            assert moves == {m.uci() for m in chess.Board(fen).legal_moves}
        states = [decode_record("state_value", r) for r in BagReader(find_bag(generated_data, split, "state_value"))]
        best = [decode_record("behavioral_cloning", r) for r in BagReader(find_bag(generated_data, split, "behavioral_cloning"))]
        assert [s[0] for s in states] == [b[0] for b in best] and set(fens) == {s[0] for s in states}
        assert len(states) == info["counts"][split]["positions"]
        keys[split] = {" ".join(f.split()[:4]) for f in fens}
        assert len(keys[split]) == len(fens)  # de-duplicated
    assert not keys["train"] & keys["test"]  # split by game, test positions removed from train


def test_make_data_resumes_and_rejects_changed_settings(generated_data, tmp_path):
    from zoo.chess.make_data import DataConfig, default_book, make_data

    games = generated_data / "games"
    stamps = {p.name: p.stat().st_mtime_ns for p in games.iterdir()}
    cfg = DataConfig(num_games=5, depth=2, selfplay_depth=1, max_plies=8, max_book_plies=4, test_fraction=0.3, seed=3, book=default_book())
    make_data(generated_data, cfg, workers=1, progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in games.iterdir() if p.name in stamps} == stamps  # kept, not redone
    assert len(list(games.iterdir())) == 5
    with pytest.raises(ValueError, match="depth"):
        make_data(generated_data, DataConfig(num_games=5, depth=3, selfplay_depth=1, max_plies=8, max_book_plies=4, test_fraction=0.3, seed=3, book=default_book()), progress=False)
    with pytest.raises(FileNotFoundError, match="Stockfish"):
        DataConfig(stockfish="/nonexistent/stockfish")


def test_mate_scores_convert_to_zoo_convention():
    import chess
    import chess.engine

    from zoo.chess.make_data import score_to_win_prob

    assert score_to_win_prob(chess.engine.PovScore(chess.engine.Mate(2), chess.WHITE), chess.WHITE) == 1.0
    assert score_to_win_prob(chess.engine.PovScore(chess.engine.Mate(2), chess.WHITE), chess.BLACK) == 0.0
    assert score_to_win_prob(chess.engine.PovScore(chess.engine.Cp(100), chess.BLACK), chess.BLACK) == 0.5910258971916128


def test_training_order_is_seeded_per_epoch_and_resumes_mid_epoch(generated_data):
    assert_training_order_resumes(lambda: ChessDataModule(str(generated_data), policy="action_value", batch_size=4))


def test_make_data_warns_of_an_empty_split_and_training_says_how_to_fill_it(tmp_path, capsys):
    out = tmp_path / "data"
    assert main(["chess", "make-data", str(out), "--games", "1", "--depth", "1", "--selfplay-depth", "1",
                 "--max-plies", "4", "--max-book-plies", "0", "--test-fraction", "0", "--workers", "1"]) == 0
    assert "warning: no game went to the test split (1 games, --test-fraction 0.0)" in capsys.readouterr().err
    data = ChessDataModule(str(out), policy="action_value")
    with pytest.raises(ValueError, match=r"test/action_value_data.bag holds no records: .*--games N"):
        data.setup("fit")
