"""Evaluation (perplexity, logit agreement) and the `zoo bitdelta` / `zoo convert bitdelta` commands."""

import copy
import json
import math

import pytest
import torch
import torch.nn.functional as F
from bitdelta_testdata import FIXTURES

import zoo
from zoo.bitdelta.data import ByteTokenizer, load_token_rows
from zoo.bitdelta.evaluate import logit_agreement, perplexity, recovered_fraction
from zoo.bitdelta.model import apply_deltas_
from zoo.cli import main

BASE, FINETUNE = str(FIXTURES / "base"), str(FIXTURES / "finetune")
TEXT = "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. " * 3


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "heldout.txt"
    path.write_text(TEXT)
    return path


def test_perplexity_is_exp_of_the_mean_next_token_nll(models, text_file):
    ids = torch.tensor(ByteTokenizer().encode(TEXT))
    rows = ids[: len(ids) // 32 * 32].view(-1, 32)
    assert torch.equal(load_token_rows(text_file, "bytes", 32), rows)
    with torch.no_grad():
        logits = models["finetune"](input_ids=rows).logits
    nll = F.cross_entropy(logits[:, :-1].reshape(-1, 256), rows[:, 1:].reshape(-1)).item()
    result = perplexity(models["finetune"], text_file, max_length=32, batch_size=3)
    assert result["tokens"] == rows.shape[0] * 31
    assert result["nll"] == pytest.approx(nll, rel=1e-6) and result["ppl"] == pytest.approx(math.exp(nll), rel=1e-6)


def test_recovered_fraction():
    assert recovered_fraction(2.0, 1.0, 1.05) == pytest.approx(0.95)
    with pytest.raises(ValueError, match="does not improve"):
        recovered_fraction(1.0, 1.2, 1.1)


def test_logit_agreement(models, delta_a, logits):
    same = logit_agreement(models["finetune"], models["finetune"], logits["input_ids"])
    assert same == {"mse": 0.0, "max_abs": 0.0, "kl": 0.0, "top1": 1.0}
    model = apply_deltas_(copy.deepcopy(models["base"]), [delta_a], merged=True)
    result = logit_agreement(model, models["finetune"], logits["input_ids"])
    expected = F.mse_loss(logits["logits_reconstructed"], logits["logits_finetune"]).item()
    assert result["mse"] == pytest.approx(expected, rel=1e-4)
    assert result["mse"] == pytest.approx(0.00321, rel=2e-3)  # the fixture README's figure
    assert 0 < result["kl"] and 0.5 < result["top1"] < 1


def test_cli_compress_eval_publish_convert(tmp_path, text_file, capsys):
    out = tmp_path / "delta"
    assert main(["bitdelta", "compress", "--base", BASE, "--finetune", FINETUNE, "--out", str(out)]) == 0
    assert "compressed 14 layers, carried 7" in capsys.readouterr().out
    model = zoo.load(out)
    assert model.hparams.base == BASE

    assert main(["bitdelta", "eval", str(out), "--text", str(text_file), "--finetune", FINETUNE,
                 "--max-length", "32", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["bitdelta"]["tokens"] == report["finetune"]["tokens"] > 0
    assert report["agreement"]["top1"] > 0.5 and report["agreement"]["mse"] > 0
    # on this text the fine-tune (trained on another synthetic language) is worse than the base: no recovery figure
    assert ("recovered" in report) == (report["finetune"]["nll"] < report["base"]["nll"])
    assert main(["bitdelta", "eval", str(out), "--text", str(text_file), "--finetune", FINETUNE, "--max-length", "32"]) == 0
    assert "base" in capsys.readouterr().out

    assert main(["publish", str(out), str(tmp_path / "published")]) == 0
    assert "model.safetensors" in capsys.readouterr().out
    card = (tmp_path / "published" / "README.md").read_text()
    assert "bitdelta" in card and BASE in card
    assert (tmp_path / "published" / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()

    assert main(["convert", "bitdelta", str(FIXTURES / "diff.pt"), "--out", str(tmp_path / "conv"),
                 "--base", BASE, "--base-path", BASE, "--base-dtype", "float32"]) == 0
    assert "sha256" in capsys.readouterr().out
    assert zoo.load(tmp_path / "conv").hparams.base_sha256 == model.hparams.base_sha256

    assert main(["bitdelta", "compress", "--base", BASE, "--finetune", FINETUNE, "--out", str(tmp_path / "x"),
                 "--select", "*.nothing"]) == 2
    assert "no layer" in capsys.readouterr().err


def test_cli_distill(tmp_path, delta_a, capsys):
    out = tmp_path / "distilled"
    assert main(["bitdelta", "distill", "--base", BASE, "--finetune", FINETUNE, "--out", str(out),
                 "--data", str(FIXTURES / "distill_batches.safetensors"), "--steps", "3", "--accelerator", "cpu"]) == 0
    distilled = zoo.load(out).to_delta()  # scales mode: new scales, same signs and carried tensors
    assert all(distilled.scales[n].item() != delta_a.scales[n].item() for n in delta_a.modules)
    assert all(torch.equal(distilled.masks[n], delta_a.masks[n]) for n in delta_a.modules)
    assert all(torch.equal(distilled.params[k], delta_a.params[k]) for k in delta_a.params)


def test_cli_demo_serves_deltas_and_base_in_one_batch(tmp_path, delta_a, delta_b, models, capsys):
    delta_a.save(tmp_path / "a")
    delta_b.save(tmp_path / "b")
    assert main(["bitdelta", "demo", str(tmp_path / "a"), str(tmp_path / "b"), "--with-base", "--prompt", "Once",
                 "--max-new-tokens", "6"]) == 0
    out = capsys.readouterr().out
    assert "3 tenants in one batch" in out
    texts = out.split("--- ")[1:]
    prompt = torch.tensor([ByteTokenizer().encode("Once")])
    expected_base = models["base"].generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)[0]
    assert texts[2] == f"base\nOnce{ByteTokenizer().decode(expected_base[4:].tolist())}\n"


def test_the_delta_keeps_most_of_the_fine_tune_gain(models, delta_a):
    """On text of fine-tune A's synthetic language (x[t+1] = 5·x[t] + 3 mod 256, 10 % noise), the 1-bit delta
    keeps most of what fine-tuning gained over the base."""
    g = torch.Generator().manual_seed(0)
    x = torch.zeros(16, 32, dtype=torch.long)
    x[:, 0] = torch.randint(0, 256, (16,), generator=g)
    for t in range(31):
        noise = torch.rand(16, generator=g) < 0.1
        x[:, t + 1] = torch.where(noise, torch.randint(0, 256, (16,), generator=g), (5 * x[:, t] + 3) % 256)
    model = apply_deltas_(copy.deepcopy(models["base"]), [delta_a], merged=True)
    nll = {name: perplexity(m, x)["nll"] for name, m in (("base", models["base"]), ("finetune", models["finetune"]),
                                                        ("delta", model))}
    assert nll["finetune"] < nll["base"] - 0.2
    assert 0.8 < recovered_fraction(nll["base"], nll["finetune"], nll["delta"]) < 1.0  # measured 0.896
