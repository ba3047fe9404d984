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
