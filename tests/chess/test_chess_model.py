import pytest
import torch
from chess_testdata import FIXTURES, TINY, last_log_prob_error, official_io

import zoo
from zoo.chess.convert import convert, haiku_to_state_dict, infer_config, read_npz
from zoo.chess.model import ChessTransformer, ChessTransformerConfig
from zoo.chess.module import ChessTransformerModule, hl_gauss_targets
from zoo.registry import get_entry, list_models


def test_npz_conversion_matches_official_log_probs(tiny_av):
    io = official_io()
    sequences = torch.from_numpy(io["sequences"]).long()
    with torch.no_grad():
        log_probs = tiny_av(sequences)
    assert log_probs.dtype == torch.float32
    last = (log_probs[:, -1] - torch.from_numpy(io["log_probs"])).abs().max().item()
    full = (log_probs[:4] - torch.from_numpy(io["log_probs_full"])).abs().max().item()
    assert last <= 1e-5 and full <= 1e-5, (last, full)
    loss = torch.nn.functional.nll_loss(log_probs[:, -1], sequences[:, -1]).item()
    assert abs(loss - float(io["loss"])) < 1e-5
    assert tiny_av.model.num_params() == 102_816


def test_orbax_conversion_equals_npz(tmp_path, tiny_av):
    pytest.importorskip("tensorstore")
    module = convert(FIXTURES / "model_av_tiny" / "orbax", tmp_path, num_heads=4, policy="action_value")
    for (name, a), b in zip(module.state_dict().items(), tiny_av.state_dict().values()):
        assert torch.equal(a, b), name
    assert last_log_prob_error(zoo.load(tmp_path)) <= 1e-5


def test_transposes_haiku_linears():
    params = read_npz(FIXTURES / "model_av_tiny" / "params.npz")
    state = haiku_to_state_dict(params, 2)
    assert torch.equal(state["blocks.1.attn.v.weight"], torch.from_numpy(params["multi_head_dot_product_attention_1/linear_2/w"].T))
    assert torch.equal(state["blocks.0.mlp.gate.weight"], torch.from_numpy(params["linear/w"].T))
    assert torch.equal(state["head.bias"], torch.from_numpy(params["linear_6/b"]))
    cfg = infer_config(params, num_heads=4, policy="action_value")
    assert (cfg.num_layers, cfg.embedding_dim, cfg.output_size, cfg.policy) == (2, 32, 128, "action_value")
    with pytest.raises(ValueError, match="does not fit"):
        infer_config(params, policy="behavioral_cloning", num_heads=4)


@pytest.mark.parametrize("name", list_models(method="chess"))
def test_catalog_architectures_have_their_stated_parameter_counts(name):
    arch = get_entry(name).architecture
    fields = ("policy", "num_layers", "embedding_dim", "num_heads", "widening_factor")
    with torch.device("meta"):
        model = ChessTransformer(ChessTransformerConfig(**{k: arch[k] for k in fields}))
    assert model.num_params() == arch["num_params"]


def test_save_and_load_round_trip(tmp_path):
    torch.manual_seed(0)
    module = ChessTransformerModule(policy="state_value", **TINY)
    module.save_pretrained(tmp_path)
    loaded = zoo.load(tmp_path)
    x = torch.randint(0, 31, (3, 78))
    with torch.no_grad():
        assert torch.equal(module.eval()(x), loaded(x))
    assert loaded.policy == "state_value" and not loaded.training


def test_bad_configs_raise():
    with pytest.raises(ValueError, match="policy"):
        ChessTransformerModule(policy="qvalue")
    with pytest.raises(ValueError, match="divisible"):
        ChessTransformerModule(embedding_dim=30, num_heads=4)
    with pytest.raises(ValueError, match="hl_gauss"):
        ChessTransformerModule(policy="behavioral_cloning", hl_gauss_sigma=0.75)


def test_hl_gauss_targets_are_distributions_centred_on_the_value():
    p = torch.tensor([0.0, 0.3, 0.5, 0.99])
    targets = hl_gauss_targets(p, 128, 0.75)
    assert torch.allclose(targets.sum(-1), torch.ones(4))
    mean = targets.double() @ ((torch.arange(128, dtype=torch.float64) + 0.5) / 128)
    assert abs(mean[1] - 0.3) < 1e-3 and abs(mean[2] - 0.5) < 1e-6
    assert targets[1].argmax() == int(0.3 * 128)
