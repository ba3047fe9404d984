"""Other architectures and serving cases: GPT-2 (Conv1D, tied embeddings), extra tokens, biases, generation,
Lightning checkpoints."""

import copy

import pytest
import torch
from bitdelta_testdata import FIXTURES, hf_model, perturbed, reconstruct, cpu_trainer

import zoo
from zoo.bitdelta.delta import compress
from zoo.bitdelta.model import TenantSwitch, apply_deltas_, use_tenants
from zoo.bitdelta.serve import MultiTenantLM


def test_gpt2_conv1d_layers_and_tied_embeddings():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    base = GPT2LMHeadModel(GPT2Config(vocab_size=100, n_positions=32, n_embd=64, n_layer=2, n_head=4)).eval()
    finetune = perturbed(base, 1)
    assert finetune.lm_head.weight is finetune.transformer.wte.weight
    official = compress(base, finetune, progress=False)
    assert official.modules == ["transformer.h.0.mlp.c_proj", "transformer.h.1.mlp.c_proj"]  # the substring rule
    delta = compress(base, finetune, select=["*.c_attn", "*.c_proj", "*.c_fc"], progress=False)
    assert delta.shapes["transformer.h.0.attn.c_attn"] == (192, 64)  # Conv1D (in, out) seen as (out, in)
    assert "lm_head.weight" not in delta.params and "transformer.wte.weight" in delta.params  # tied: carried once
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(3))
    for merged in (True, False):
        model = apply_deltas_(copy.deepcopy(base), [delta], merged=merged)
        assert model.lm_head.weight is model.transformer.wte.weight  # the carried tensor stays tied
        with torch.no_grad():
            got = model(input_ids=ids).logits
            want = reconstruct(base, finetune, delta)(input_ids=ids).logits
        assert (got - want).abs().max().item() <= 1e-5


def test_tenants_with_extra_tokens_get_padded_logits(models, delta_a):
    base = models["base"]
    bigger = copy.deepcopy(models["finetune_b"])
    bigger.resize_token_embeddings(260)
    delta_big = compress(base, bigger, progress=False)
    assert delta_big.params["lm_head.weight"].shape == (260, 64)
    server = apply_deltas_(copy.deepcopy(base), [delta_a, delta_big])
    assert isinstance(server.lm_head, TenantSwitch) and isinstance(server.model.embed_tokens, TenantSwitch)
    ids = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(0))
    ids[1, 3] = 259  # a token only tenant 1 knows
    with torch.no_grad(), use_tenants(server, [0, 1]):
        out = server(input_ids=ids).logits
    assert out.shape == (2, 8, 260)
    assert (out[0, :, 256:] == torch.finfo(out.dtype).min).all()  # tenant 0 has no such tokens
    alone = apply_deltas_(copy.deepcopy(base), [delta_big], merged=True)
    assert alone.config.vocab_size == 260
    with torch.no_grad():
        assert (out[1:] - alone(input_ids=ids[1:]).logits).abs().max().item() <= 1e-5


def test_per_tenant_biases(tmp_path):
    from toy import ToyRegressor

    torch.manual_seed(0)
    base = ToyRegressor(width=32, depth=1).eval()
    finetunes = [perturbed(base, s) for s in (1, 2)]
    deltas = [compress(base, ft, select=["net.*"], progress=False) for ft in finetunes]
    assert "net.0.bias" in deltas[0].params
    server = apply_deltas_(copy.deepcopy(base), deltas)
    assert server.net[0].bias.shape == (2, 32)
    x = torch.randn(4, 4)
    with torch.no_grad(), use_tenants(server, [1, 0, 0, 1]):
        out = server(x)
    for row, tenant in enumerate([1, 0, 0, 1]):
        want = reconstruct(base, finetunes[tenant], deltas[tenant])
        with torch.no_grad():
            torch.testing.assert_close(out[row], want(x[row : row + 1])[0], rtol=0, atol=1e-6)


def test_multitenant_generation_equals_each_fine_tune(tmp_path, delta_a, delta_b):
    delta_a.save(tmp_path / "a")
    delta_b.save(tmp_path / "b")
    server = MultiTenantLM.from_repos([tmp_path / "a", tmp_path / "b"])
    prompt = torch.randint(3, 256, (1, 6), generator=torch.Generator().manual_seed(5)).repeat(2, 1)
    kwargs = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": 0}
    tokens = server.generate(prompt, tenants=[0, 1], **kwargs)
    for row, folder in enumerate(("a", "b")):
        alone = zoo.load(tmp_path / folder).model
        assert torch.equal(tokens[row], alone.generate(prompt[row : row + 1], **kwargs)[0])
    with pytest.raises(ValueError, match="beam"):
        server.generate(prompt, tenants=[0, 1], num_beams=2)
    other = compress(hf_model("finetune"), hf_model("finetune_b"), base_name="finetune", progress=False)
    with pytest.raises(ValueError, match="tenant 0: the base weights do not match"):
        MultiTenantLM(hf_model("base"), [other])


def test_lightning_checkpoint_publishes_as_a_delta(tmp_path, delta_a):
    from zoo.bitdelta.data import TextDataModule

    delta_a.save(tmp_path / "delta")
    model = zoo.load(tmp_path / "delta", merged=False)
    data = TextDataModule(train=str(FIXTURES / "distill_batches.safetensors"))
    cpu_trainer(tmp_path, 1, enable_checkpointing=True).fit(model, datamodule=data)
    (ckpt,) = tmp_path.rglob("*.ckpt")
    zoo.publish(str(ckpt), tmp_path / "published")  # rebuilt from the checkpoint's hyperparameters alone
    published = zoo.load(tmp_path / "published").to_delta()
    trained = model.to_delta()
    assert all(torch.equal(published.scales[n], trained.scales[n]) for n in trained.modules)
    assert all(torch.equal(published.params[k], trained.params[k]) for k in trained.params)


def test_publish_dtype_of_a_distillation_checkpoint_says_to_publish_first():
    from zoo.bitdelta.module import ScaleDistillation
    from zoo.errors import ConfigError

    with pytest.raises(ConfigError, match=r"publish it first, then `zoo publish DELTA_FOLDER REPO --dtype bfloat16`"):
        ScaleDistillation.store_as_(None, torch.bfloat16)


def test_merged_layers_compile_into_one_graph():
    """torch.compile traces a merged model without a graph break (a host-synced α check inside would split it, and a
    gradient traced through it, as EScAIP's compiled forces are, would fall back to eager); the compiled output is
    the eager one, and an eager call still folds a changed α into the merged weight."""
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    finetune = perturbed(base, 1)
    model = apply_deltas_(copy.deepcopy(base), [compress(base, finetune, select=["0", "2"], progress=False)],
                          merged=True)
    x = torch.randn(5, 8)
    compiled = torch.compile(model, fullgraph=True, backend="eager")  # fullgraph: a graph break raises
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
        before = model[0].merged_scale.clone()
        model[0].scales.mul_(1.5)
        moved = model(x)  # eager: folds the new α in
    assert torch.equal(model[0].merged_scale, model[0].scales) and not torch.equal(before, model[0].scales)
    torch.testing.assert_close(compiled(x), moved, rtol=0, atol=0)
