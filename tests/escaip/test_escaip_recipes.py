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


def test_qm9_card_is_written_from_the_two_stages_measurements(emt_data, tmp_path, monkeypatch):
    """make_qm9_card.py: every number of the escaip-qm9-xtb card comes from the runs (resolved recipe, validation
    curve, Timer state of last.ckpt) and the evaluation's metrics.json, and the card passes the card check."""
    import importlib.util
    import json
    import shutil

    from zoo.card import load_card
    from zoo.train import run_recipe

    root = RECIPES[0].parents[2]
    spec = importlib.util.spec_from_file_location("make_qm9_card", root / "recipes" / "escaip" / "make_qm9_card.py")
    make_qm9_card = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_qm9_card)

    monkeypatch.chdir(tmp_path)  # the recipes write to runs/escaip-qm9-xtb{-base,}
    for recipe in ("qm9_xtb_base", "qm9_xtb"):
        run_recipe(root / "recipes" / "escaip" / f"{recipe}.yaml", [
            f"--data.init_args.train=[{emt_data}]", f"--data.init_args.val=[{emt_data}]", "--data.init_args.exclude=[]",
            "--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1",
            "--trainer.num_sanity_val_steps=0", "--trainer.enable_progress_bar=false",
        ])
    base, final = tmp_path / "runs" / "escaip-qm9-xtb-base", tmp_path / "runs" / "escaip-qm9-xtb"
    hub = root / "hub" / "escaip-qm9-xtb"
    with pytest.raises(SystemExit, match="build_qm9_xtb.sh eval"):
        monkeypatch.setattr("sys.argv", ["make_qm9_card.py", str(base), str(final), "--out", "card.yaml"])
        make_qm9_card.main()
    (final / "eval").mkdir()
    shutil.copy(hub / "metrics.json", final / "eval" / "metrics.json")
    shutil.copytree(hub, final / "repo")
    make_qm9_card.main()

    card = load_card(tmp_path / "card.yaml")
    measured = json.loads((hub / "metrics.json").read_text())
    values = {m["name"]: m["value"] for m in card["metrics"]}
    assert values["g2_force_mae_meV_per_A"] == round(measured["overall"]["g2_force_mae_meV_per_A"], 1)
    assert values["val_force_mae_meV_per_A"] == round(measured["overall"]["qm9_val"]["force_mae_meV_per_A"], 1)
    worst = max(measured["g2"], key=lambda r: r["force_mae_meV_per_A"])
    assert values["g2_molecules_over_150_meV_per_A"] == sum(r["force_mae_meV_per_A"] > 150 for r in measured["g2"])
    assert f"| {worst['system']} | {worst['frames']} |" in card["training"]
    # the training paragraph reports what ran here: 2 steps per stage, each recipe's lr, one validation per stage
    val = [list(make_qm9_card.stage(run, None)["val"].values()) for run in (base, final)]
    assert len(val[0]) == len(val[1]) == 1
    assert "for 1 epochs (2 steps of at most 256 atoms; AdamW lr 0.002" in card["training"]
    assert f"stage 1 {val[0][0]:.1f} meV/Å; stage 2 {val[1][0]:.1f} meV/Å" in card["training"]
    assert "0.46M parameters" in card["description"]
