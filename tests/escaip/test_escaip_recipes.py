"""Recipes: every one names valid classes and a valid backbone; the small CPU recipe trains as written."""

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from zoo.escaip.model import CONFIGS, EScAIPConfig
from zoo.registry import import_object

RECIPES = sorted((Path(__file__).resolve().parents[2] / "recipes" / "escaip").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.stem for r in RECIPES])
def test_recipe_is_valid(recipe):
    cfg = OmegaConf.to_container(OmegaConf.load(recipe), resolve=True)
    import_object(cfg["model"]["class_path"].replace(".EScAIPModule", ":EScAIPModule"))
    import_object(cfg["data"]["class_path"].replace(".EScAIPDataModule", ":EScAIPDataModule"))
    backbone = dict(cfg["model"]["init_args"]["backbone"])
    preset = backbone.pop("preset")
    EScAIPConfig.from_dict({**CONFIGS[preset], **backbone})  # raises on any invalid option


def test_authors_sizes():
    assert {n for n in CONFIGS} >= {"H512L10", "H1024L8", "H640L6"}
    assert RECIPES and any(r.stem == "small_cpu" for r in RECIPES)


def test_small_cpu_recipe_runs(emt_data, tmp_path):
    from zoo.train import run_recipe

    recipe = next(r for r in RECIPES if r.stem == "small_cpu")
    cli = run_recipe(recipe, [
        f"--data.init_args.train={emt_data}", "--data.init_args.val_fraction=0.25",
        "--trainer.max_steps=2", "--trainer.limit_val_batches=1", "--trainer.num_sanity_val_steps=0",
        "--trainer.logger=false", "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={tmp_path}",
    ])
    assert cli.trainer.global_step == 2
    assert bool(cli.model.scaling.fitted) and cli.model.cfg.hidden_size == 128
    # the recipe's checkpoints load with weights_only=True: averaged weights in the state dict, raw ones kept to resume
    ckpt = torch.load(next(tmp_path.rglob("last.ckpt")), weights_only=True)
    assert ckpt["zoo_model_type"] == "escaip" and "scaling.element_references" in ckpt["state_dict"]
    assert set(ckpt["zoo_ema"]["raw"]) == {n for n, _ in cli.model.model.named_parameters()}


def test_qm9_card_is_written_from_the_three_stages_measurements(emt_data, tmp_path, monkeypatch):
    """make_qm9_card.py: every number of the escaip-qm9-xtb card comes from the runs (resolved recipe, validation
    curve, Timer state of last.ckpt, or the stage.json kept from them) and the evaluations' metrics.json, and the
    card passes the card check."""
    import importlib.util
    import json
    import shutil

    from zoo.card import load_card
    from zoo.train import run_recipe

    root = RECIPES[0].parents[2]
    spec = importlib.util.spec_from_file_location("make_qm9_card", root / "recipes" / "escaip" / "make_qm9_card.py")
    make_qm9_card = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_qm9_card)

    monkeypatch.chdir(tmp_path)  # the recipes write to runs/escaip-qm9-xtb{-base,-stage2,}
    for recipe in ("qm9_xtb_base", "qm9_xtb", "qm9_xtb_smooth"):
        run_recipe(root / "recipes" / "escaip" / f"{recipe}.yaml", [
            f"--data.init_args.train=[{emt_data}]", f"--data.init_args.val=[{emt_data}]", "--data.init_args.exclude=[]",
            "--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1",
            "--trainer.num_sanity_val_steps=0", "--trainer.enable_progress_bar=false",
        ])
    runs = [tmp_path / "runs" / f"escaip-qm9-xtb{suffix}" for suffix in ("-base", "-stage2", "")]
    final = runs[-1]
    hub = root / "hub" / "escaip-qm9-xtb"
    with pytest.raises(SystemExit, match="build_qm9_xtb.sh eval"):
        monkeypatch.setattr("sys.argv", ["make_qm9_card.py", *map(str, runs), "--out", "card.yaml"])
        make_qm9_card.main()
    for folder, measured in (("eval", "metrics.json"), ("eval-md", "md_metrics.json")):
        (final / folder).mkdir()
        shutil.copy(hub / measured, final / folder / "metrics.json")
    shutil.copytree(hub, final / "repo")
    make_qm9_card.main()
    # a stage whose logs and checkpoints are gone is read from the stage.json kept from it: the same card
    first = (tmp_path / "card.yaml").read_text()
    shutil.rmtree(runs[0] / "lightning_logs")
    (runs[0] / "checkpoints" / "last.ckpt").unlink()
    make_qm9_card.main()
    assert (tmp_path / "card.yaml").read_text() == first

    card = load_card(tmp_path / "card.yaml")
    measured = json.loads((hub / "metrics.json").read_text())
    values = {m["name"]: m["value"] for m in card["metrics"]}
    assert values["g2_force_mae_meV_per_A"] == round(measured["overall"]["g2_force_mae_meV_per_A"], 1)
    assert values["val_force_mae_meV_per_A"] == round(measured["overall"]["qm9_val"]["force_mae_meV_per_A"], 1)
    worst = max(measured["g2"], key=lambda r: r["force_mae_meV_per_A"])
    assert values["g2_molecules_over_150_meV_per_A"] == sum(r["force_mae_meV_per_A"] > 150 for r in measured["g2"])
    assert f"| {worst['system']} | {worst['frames']} |" in card["training"]
    # the training paragraph reports what ran here: 2 steps per stage, each recipe's lr, one validation per stage
    val = [list(make_qm9_card.stage(run, None)["val"].values()) for run in runs]
    assert [len(v) for v in val] == [1, 1, 1]
    assert "for 1 epoch (2 steps of at most 256 atoms; AdamW lr 0.002" in card["training"]
    assert "recipes/escaip/qm9_xtb_smooth.yaml`, the same data with the smooth" in card["training"]
    assert f"stage 1 {val[0][0]:.1f} meV/Å; stage 2 {val[1][0]:.1f} meV/Å; stage 3 {val[2][0]:.1f}" in card["training"]
    md = json.loads((hub / "md_metrics.json").read_text())
    assert values["nve_std_over_xtb_worst"] == round(max(r["nve_std_ratio"] for r in md["molecules"].values()), 2)
    assert f"| aspirin | 21 | {md['molecules']['aspirin']['nve_zoo_std_meV']:.2f} |" in card["training"]
    assert "0.46M parameters" in card["description"]


def test_qm9_recipe_fine_tunes_the_published_model_on_your_data(emt_data, tmp_path, monkeypatch, capsys):
    # the recipe's data paths are arguments: outside a checkout's data/ a user's own frames are all it needs
    from zoo.cli import main

    monkeypatch.chdir(tmp_path)
    args = [f"--data.init_args.train={emt_data}", "--trainer.max_steps=1", "--trainer.limit_val_batches=1",
            "--trainer.num_sanity_val_steps=0", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false"]
    # stage 2's recipe has the same weight shapes but not the published model's smooth bond-orientational order
    assert main(["finetune", "escaip-qm9-xtb", str(next(r for r in RECIPES if r.stem == "qm9_xtb")), *args]) == 2
    assert ("the recipe's model differs from escaip-qm9-xtb in options that change no weight shape: smooth_boo=True "
            "in the model, False in the recipe; set the model's values in the recipe") in capsys.readouterr().err
    assert main(["finetune", "escaip-qm9-xtb", "escaip/qm9_xtb_smooth", *args]) == 0  # a shipped recipe by name
    last = tmp_path / "runs" / "escaip-qm9-xtb" / "checkpoints" / "last.ckpt"
    assert f"final state: {last} " in capsys.readouterr().out
    assert torch.load(last, weights_only=True)["global_step"] == 1


def test_a_truncated_or_unlabelled_frame_is_one_error_before_training(emt_data, tmp_path, capfd):
    from ase import Atoms
    from ase.io import write

    from zoo.cli import main

    segment = sorted(emt_data.glob("emt/*/*/seg_*.extxyz"))[0]
    lines = segment.read_text().splitlines(keepends=True)
    frame_lines = int(lines[0]) + 2
    truncated = tmp_path / "truncated.extxyz"
    truncated.write_text("".join(lines[:frame_lines + 5]))  # frame 1 stops after 3 of its atoms
    unlabelled = tmp_path / "unlabelled.extxyz"
    write(unlabelled, [Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.5]])])
    recipe = next(r for r in RECIPES if r.stem == "tiny_emt")
    for data, problem in ((truncated, ": frame 1 (counting from 0) cannot be read (ase.io.extxyz: Frame has 3 atoms"),
                          (unlabelled, ": frame 0 (counting from 0): structure Cu2 has no energy/forces labels"),
                          (tmp_path / "no-such-folder", " does not exist: make data with `zoo escaip make-data`")):
        assert main(["train", str(recipe), f"--data.init_args.train={data}",
                     f"--trainer.default_root_dir={tmp_path / 'run'}"]) == 2
        out, err = capfd.readouterr()
        assert not out and err.count("\n") == 1 and err.startswith(f"zoo: error: {data}{problem}")
        assert not (tmp_path / "run").exists()  # refused before the Trainer started
