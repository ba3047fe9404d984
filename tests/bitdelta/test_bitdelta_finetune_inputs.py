"""What `zoo bitdelta compress` / `distill` take from a user's fine-tune (issue 44): a float32 fine-tune of a bfloat16
base (what `zoo finetune` publishes), and one clear line for a fine-tune of another model or a delta whose base is
gone."""

import logging
import shutil
import warnings

import pytest
import torch
from bitdelta_testdata import perturbed

import zoo
from zoo.bitdelta._bits import pack_signs, unpack_signs
from zoo.bitdelta.delta import BitDelta, linear_weight
from zoo.bitdelta.serve import MultiTenantLM
from zoo.cli import main

BASE = "llama-bytes-3m"  # stored in bfloat16


@pytest.fixture(scope="module")
def float32_finetune(tmp_path_factory):
    """A float32 fine-tune of the bfloat16 base, as `zoo finetune` publishes one: updates of std 1e-3."""
    folder = tmp_path_factory.mktemp("ft32") / "finetune"
    perturbed(zoo.load(BASE, dtype="float32"), scale=1e-3).save_pretrained(folder)
    return folder


def test_a_float32_finetune_of_a_bfloat16_base(float32_finetune, tmp_path, capsys):
    assert main(["bitdelta", "compress", "--base", BASE, "--finetune", str(float32_finetune), "--out", str(tmp_path / "d")]) == 0
    assert ("note: the fine-tune is float32, its base bfloat16: both are compared in float32 (exact), and the delta "
            "applies to the base in float32") in capsys.readouterr().out
    base, finetune, delta = zoo.load(BASE, dtype="float32"), zoo.load(float32_finetune), BitDelta.load(tmp_path / "d")
    assert delta.base_dtype == "float32" and {t.dtype for t in delta.params.values()} == {torch.float32}
    loaded = zoo.load(tmp_path / "d")  # the base upcast as when compressed: its fingerprint checks
    lost = 0
    for name in delta.modules:  # the signs and scale of the float32 update
        w_base = linear_weight(base.get_submodule(name))
        update = linear_weight(finetune.get_submodule(name)) - w_base
        assert torch.equal(delta.masks[name], pack_signs(update)) and delta.scales[name] == update.abs().mean()
        merged = loaded.model.get_submodule(name).weight  # a merged BitDeltaLinear
        assert merged.dtype == torch.float32 and torch.equal(merged, w_base + delta.scales[name] * unpack_signs(
            delta.masks[name], w_base.shape[1], torch.float32))
        lost += int((merged.bfloat16() == w_base.bfloat16()).sum())
    assert lost > 0  # in bfloat16 some of the fine-tune's updates would round away: why the base is upcast
    assert loaded.generate("To be", 8)
    # it shares its base with the zoo's own deltas of it (made the same way) and serves beside them in one batch
    server = MultiTenantLM.from_repos([str(tmp_path / "d"), "llama-bytes-3m-austen-bitdelta"])
    assert server.generate(torch.tensor([[84, 111], [84, 111]]), tenants=[0, 1], max_new_tokens=4,
                           do_sample=False).shape == (2, 6)


def test_a_finetune_checkpoint_compresses_as_its_published_repo(float32_finetune, tmp_path, capsys):
    finetune = zoo.load(float32_finetune)  # a checkpoint as `zoo finetune` leaves it: the module's type, hparams, state
    torch.save({"zoo_model_type": finetune.model_type, "hyper_parameters": dict(finetune.hparams),
                "state_dict": finetune.state_dict()}, tmp_path / "last.ckpt")
    for source, out in ((tmp_path / "last.ckpt", "from_ckpt"), (float32_finetune, "from_repo")):
        assert main(["bitdelta", "compress", "--base", BASE, "--finetune", str(source), "--out", str(tmp_path / out)]) == 0
    assert (tmp_path / "from_ckpt" / "model.safetensors").read_bytes() == (tmp_path / "from_repo" / "model.safetensors").read_bytes()


def test_distill_a_float32_finetune_quietly(float32_finetune, tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.setattr(logging.getLogger("lightning.pytorch"), "propagate", True)  # its info lines, to caplog
    caplog.set_level(logging.INFO)
    text = tmp_path / "text.txt"
    text.write_text("It is a truth universally acknowledged, that a single man in possession of a good fortune. " * 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["bitdelta", "distill", "--base", BASE, "--finetune", str(float32_finetune), "--out",
                     str(tmp_path / "d"), "--data", str(text), "--steps", "2", "--batch-size", "2", "--max-length", "32",
                     "--accelerator", "cpu"]) == 0
    captured = capsys.readouterr()
    assert "note: the fine-tune is float32, its base bfloat16: both are compared in float32" in caplog.text
    assert "/-2" not in captured.out + captured.err and "Epoch 0" in captured.out + captured.err  # no "Epoch 4/-2"
    assert not [w for w in caught if "in eval mode" in str(w.message)]  # the student runs as the teacher: by design
    assert BitDelta.load(tmp_path / "d").base_dtype == "float32"


def test_a_finetune_of_another_model_is_one_line(tmp_path, capsys):
    chess = tmp_path / "chess"
    zoo.load("chess-small-av").save_pretrained(chess)
    escaip = tmp_path / "escaip"
    perturbed(zoo.load("escaip-tiny-emt")).save_pretrained(escaip)
    for base, finetune, says in ((BASE, chess, "the fine-tune (ChessTransformerModule) is another kind of model than "
                                               "the base (CausalLM)"),
                                 ("escaip-small-xtb", escaip, "the fine-tune has other sizes than this base")):
        assert main(["bitdelta", "compress", "--base", base, "--finetune", str(finetune), "--out", str(tmp_path / "d")]) == 2
        out, err = capsys.readouterr()
        assert err.startswith("zoo: error: ") and says in err and err.count("\n") == 1 and out == ""
        assert not (tmp_path / "d").exists()
    text = tmp_path / "text.txt"
    text.write_text("text is for language models")
    assert main(["bitdelta", "distill", "--base", "escaip-tiny-emt", "--finetune", str(escaip), "--out",
                 str(tmp_path / "d"), "--data", str(text)]) == 2
    err = capsys.readouterr().err
    assert err == (f"zoo: error: distill trains the scales on text, which only a language model reads, and {escaip} "
                   "(EScAIPModule) is not one: `zoo bitdelta compress` makes its delta\n") and not (tmp_path / "d").exists()


def test_a_delta_whose_base_is_gone_is_one_line(tmp_path, capsys):
    base, text = tmp_path / "base", tmp_path / "text.txt"
    zoo.load("escaip-tiny-emt").save_pretrained(base)
    perturbed(zoo.load(base)).save_pretrained(tmp_path / "finetune")
    assert main(["bitdelta", "compress", "--base", str(base), "--finetune", str(tmp_path / "finetune"),
                 "--out", str(tmp_path / "delta")]) == 0
    shutil.rmtree(base)
    text.write_text("some held-out text")
    capsys.readouterr()
    assert main(["bitdelta", "eval", str(tmp_path / "delta"), "--text", str(text)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"zoo: error: the delta {tmp_path / 'delta'} applies to the base it names, '{base}', "
                          f"which cannot be loaded (cannot load the model '{base}': there is no such folder)")
    assert err.count("\n") == 1 and "--base" in err
