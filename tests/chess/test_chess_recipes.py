from pathlib import Path

import pytest
import torch
import yaml

from zoo.chess.module import ChessTransformerModule

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "chess"
OFFICIAL = {"av_9m": 8_954_240, "av_136m": 136_479_872, "av_270m": 270_730_368, "sv_9m": 8_954_240, "bc_9m": 9_427_120}


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_official_recipes_build_the_official_architectures(name):
    recipe = yaml.safe_load((RECIPES / f"{name}.yaml").read_text())
    assert recipe["model"]["class_path"] == "zoo.chess.module.ChessTransformerModule"
    with torch.device("meta"):
        module = ChessTransformerModule(**recipe["model"]["init_args"])
    assert module.model.num_params() == OFFICIAL[name]
    assert recipe["model"]["init_args"]["learning_rate"] == 1e-4 and recipe["trainer"]["gradient_clip_val"] == 1.0


def test_small_cpu_recipe_runs(generated_data, tmp_path):
    from zoo.train import run_recipe

    cli = run_recipe(
        RECIPES / "small_cpu.yaml",
        [f"--data.init_args.data_dir={generated_data}", "--data.init_args.batch_size=8", "--trainer.max_steps=2",
         "--trainer.devices=1", "--trainer.strategy=auto",  # the recipe's two DDP processes cannot start inside pytest
         "--trainer.val_check_interval=1", "--trainer.limit_val_batches=1", f"--trainer.default_root_dir={tmp_path}",
         "--trainer.enable_progress_bar=false"],
    )
    assert cli.trainer.global_step == 2
    assert cli.model.hparams.hl_gauss_sigma == 0.75
    # cosine schedule over the run's 2 steps (warm-up 300 > 2: still warming up, at 2/300 of the peak rate)
    (config,) = cli.trainer.lr_scheduler_configs
    assert config.scheduler.get_last_lr()[0] == pytest.approx(2e-3 * 3 / 300)
    with pytest.raises(ValueError, match="lr_schedule"):
        ChessTransformerModule(lr_schedule="linear")


@pytest.mark.parametrize("recipe, policy", [("small_cpu_bc.yaml", "behavioral_cloning"), ("small_cpu_sv.yaml", "state_value")])
def test_sibling_recipes_run(recipe, policy, generated_data, tmp_path):
    from zoo.train import run_recipe

    cli = run_recipe(
        RECIPES / recipe,
        [f"--data.init_args.data_dir={generated_data}", "--data.init_args.batch_size=8", "--trainer.max_steps=2",
         "--trainer.limit_val_batches=1", f"--trainer.default_root_dir={tmp_path}", "--trainer.enable_progress_bar=false"],
    )
    assert cli.trainer.global_step == 2 and cli.model.policy == policy
    assert cli.datamodule.hparams.policy == policy  # interpolated from the model's policy
    assert (tmp_path / "checkpoints" / "last.ckpt").exists()  # the checkpoint folder follows the run folder
