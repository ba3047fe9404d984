"""The engines' network call, ``LastPositionPredictor``: the model's last-position log-probs with less work.
fp32 must equal the official outputs and the plain forward; bf16 must stay close and choose the same moves."""

import chess
import numpy as np
import pytest
import torch
from chess_testdata import TINY, official_io

from zoo.chess.model import CPU_CHUNK_ROWS, ChessTransformer, ChessTransformerConfig, LastPositionPredictor
from zoo.chess.module import ChessTransformerModule
from zoo.chess.tokenizer import FEN_LENGTH, NUM_ACTIONS, VOCAB


def _random_model(policy="action_value", seed=0, **arch):
    torch.manual_seed(seed)
    return ChessTransformer(ChessTransformerConfig(policy=policy, **(arch or TINY))).eval()


def _sequences(n, length, seed=0):
    """Random FEN-token rows with an action token at 77 (AV), last token a dummy."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, len(VOCAB), (n, length), generator=g)
    if length > FEN_LENGTH + 1:
        rows[:, FEN_LENGTH] = torch.randint(0, NUM_ACTIONS, (n,), generator=g)
    return rows


def test_fp32_matches_official_log_probs(tiny_av):
    io = official_io()
    out = LastPositionPredictor(tiny_av.model)(torch.from_numpy(io["sequences"]).long())
    assert out.dtype == torch.float32 and out.shape == (16, 128)
    assert (out - torch.from_numpy(io["log_probs"])).abs().max().item() <= 1e-5


@pytest.mark.parametrize("policy, length", [("action_value", 79), ("state_value", 78), ("behavioral_cloning", 78)])
def test_fp32_equals_the_full_forward_on_random_weights(policy, length):
    model = _random_model(policy, num_layers=3, embedding_dim=64, num_heads=4)
    x = _sequences(CPU_CHUNK_ROWS + 5, length)  # more than one chunk
    with torch.no_grad():
        reference = model(x)[:, -1]
    out = LastPositionPredictor(model)(x)
    assert out.shape == reference.shape == (len(x), model.cfg.output_size)
    assert (out - reference).abs().max().item() <= 1e-5


def test_results_do_not_depend_on_the_batch():
    model = _random_model()
    predictor = LastPositionPredictor(model)
    x = _sequences(CPU_CHUNK_ROWS + 3, 79, seed=1)
    together = predictor(x)
    alone = torch.cat([predictor(x[i : i + 1]) for i in (0, 5, len(x) - 1)])
    in_pairs = predictor(x[4:6])
    torch.testing.assert_close(alone, together[[0, 5, len(x) - 1]], atol=1e-6, rtol=0)
    torch.testing.assert_close(in_pairs, together[4:6], atol=1e-6, rtol=0)
    assert predictor(x[:0]).shape == (0, 128)


def test_repacks_when_weights_change():
    model = _random_model()
    predictor = LastPositionPredictor(model)
    x = _sequences(4, 79, seed=2)
    before = predictor(x)
    with torch.no_grad():
        model.blocks[0].attn.v.weight.mul_(3.0)  # in place, as an optimizer step or load_state_dict does
        model.blocks[1].mlp.up.weight.add_(0.05)
        reference = model(x)[:, -1]
    after = predictor(x)
    assert (after - before).abs().max().item() > 1e-3
    assert (after - reference).abs().max().item() <= 1e-5


def test_weights_stored_in_bfloat16_are_computed_in_float32():
    model = _random_model()
    x = _sequences(3, 79, seed=3)
    with torch.no_grad():
        reference = model.to(torch.bfloat16).float()(x)[:, -1]  # the bf16-rounded weights, in float32
    out = LastPositionPredictor(model.to(torch.bfloat16))(x)
    assert out.dtype == torch.float32 and (out - reference).abs().max().item() <= 1e-5


def test_bf16_is_close_to_fp32_on_random_weights():
    model = _random_model(num_layers=3, embedding_dim=64, num_heads=4)
    x = _sequences(20, 79, seed=4)
    exact, fast = LastPositionPredictor(model)(x), LastPositionPredictor(model, "bf16")(x)
    assert fast.dtype == torch.float32
    gap = (fast.exp() - exact.exp()).abs().sum(-1).max().item()  # total variation x 2 of the bucket distributions
    assert 0 < gap < 0.05, gap


def test_bf16_engine_chooses_the_fp32_moves_of_a_trained_model(monkeypatch):
    """chess-small-av (trained, bundled) on positions from seeded random games: the bf16 engine chooses the fp32
    engine's move in all but at most one of 30 (99.2% of 1,000 in the benchmark; median best-second margin 0.025)."""
    import random

    import zoo

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    module = zoo.load("chess-small-av")
    rng, boards = random.Random(7), []
    while len(boards) < 30:
        board = chess.Board()
        for _ in range(rng.randint(4, 60)):
            if board.is_game_over():
                break
            board.push(rng.choice(list(board.legal_moves)))
        if not board.is_game_over():
            boards.append(board)
    exact = module.engine().analyse_many(boards)
    fast = module.engine(precision="bf16").analyse_many(boards)
    differing = sum(a.best() != b.best() for a, b in zip(exact, fast))
    gap = max(np.abs(a.win_probs - b.win_probs).max() for a, b in zip(exact, fast))
    assert differing <= 1 and 0 < gap < 0.05, (differing, gap)


def test_rejects_sequences_longer_than_the_position_table():
    with pytest.raises(ValueError, match="max_sequence_length"):
        LastPositionPredictor(_random_model())(torch.zeros(1, 80, dtype=torch.long))


def test_module_engine_passes_precision():
    module = ChessTransformerModule(policy="behavioral_cloning", **TINY)
    engine = module.engine(precision="bf16")
    assert engine.predictor.precision == "bf16"
    analysis = engine.analyse(chess.Board())
    assert len(analysis.moves) == 20 and np.exp(analysis.scores).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="precision"):
        module.engine(precision="int4")


def test_cli_precision_flag_reaches_the_engine(tmp_path, capsys, monkeypatch):
    """`--precision bf16` on the chess commands builds a bf16 engine (and fp32 stays the default)."""
    from zoo.chess import engine as engine_module
    from zoo.cli import main

    built = []
    original = engine_module.ChessEngine.__init__

    def recording(self, *args, **kwargs):
        built.append(kwargs.get("precision", "fp32"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(engine_module.ChessEngine, "__init__", recording)
    for extra in ([], ["--precision", "bf16"]):
        assert main(["chess", "board", "chess-small-av", "--out", str(tmp_path / "b.svg"), *extra]) == 0
    assert built == ["fp32", "bf16"]
    assert "best" in capsys.readouterr().out
