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


def test_make_card_reports_every_measurement_and_each_aim(tmp_path):
    """make_card.py turns a run's measurement files into the card: numbers, match table, aims met or missed."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("make_card", RECIPES / "make_card.py")
    make_card = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_card)
    run, data = tmp_path / "run", tmp_path / "data"
    (run / "eval").mkdir(parents=True)
    (run / "lightning_logs" / "version_0").mkdir(parents=True)
    data.mkdir()
    recipe = yaml.safe_load((RECIPES / "small_cpu.yaml").read_text())
    (run / "lightning_logs" / "version_0" / "config.yaml").write_text(yaml.safe_dump(recipe))
    (data / "info.json").write_text(json.dumps({
        "config": {"seed": 0, "num_games": 650, "max_book_plies": 12, "selfplay_depth": 4, "random_move_prob": 0.2,
                   "depth": 8, "test_fraction": 0.06},
        "counts": {"train": {"positions": 50_485, "action_values": 1_391_142},
                   "test": {"positions": 3_207, "action_values": 92_038}}}))
    (run / "eval" / "static.json").write_text(json.dumps(
        {"eval_action_accuracy": 0.16432, "eval_kendall_tau": 0.05754, "eval_kendall_tau_values": 0.19106, "num_fens": 3207}))
    (run / "eval" / "puzzles.json").write_text(json.dumps(
        {"p/mate_in_2.pgn": {"accuracy": 0.5, "num_puzzles": 166}, "p/mate_in_3.pgn": {"accuracy": 0.1, "num_puzzles": 375}}))
    for key, (wins, draws, losses, elo) in {"random": (90, 10, 0, 382.0), "greedy": (0, 29, 71, -308.2)}.items():
        score = (wins + draws / 2) / 100
        (run / "eval" / f"{key}.json").write_text(json.dumps(
            {"games": 100, "wins": wins, "draws": draws, "losses": losses, "adjudicated": wins + losses - 1, "score": score,
             "elo": elo, "elo_error_95": 62.3, "adjudication_time": 0.01, "max_plies": 400}))

    card = make_card.build_card(run, data, "chess-small-av", train_minutes=45)
    metrics = {m["name"]: m["value"] for m in card["metrics"]}
    assert metrics == {"action_accuracy": 0.1643, "kendall_tau": 0.0575, "kendall_tau_values": 0.1911,
                       "mate_in_2_accuracy": 0.5, "mate_in_3_accuracy": 0.1, "score_vs_random": 0.95,
                       "score_vs_greedy": 0.145}
    assert len({m["dataset"] for m in card["metrics"]}) == 5  # one model-index group per test set / opponent
    assert "| 1-ply material-greedy player | 100 | 0 | 29 | 71 | 70 | 0.145 | -308 ± 62 |" in card["training"]
    assert "Stockfish 15.1 at full strength (0.01 s) declares a win" in card["training"]
    assert "11,000 steps of 256 sequences (2.0 epochs of the 1,391,142 action values)" in card["training"]
    assert "position rows" in card["training"] and "half the training samples mirrored" in card["training"]
    assert "copy the pieces on each move's from- and to-square into the move token" in card["training"]
    assert "Meets the aim to beat the random mover (score 0.950, Elo difference +382 ± 62)" in card["limitations"]
    assert "Misses the aim to beat the material-greedy player (score 0.145" in card["limitations"]
    assert "Meets the aim to solve half the mate-in-2 problems (50.0%)" in card["limitations"]
    assert "Stockfish" not in card["limitations"]  # no match, no claim
    narrow = {"games": 100, "wins": 47, "draws": 11, "losses": 42, "adjudicated": 89, "score": 0.525, "elo": 17.4,
              "elo_error_95": 64.3, "adjudication_time": 0.01, "max_plies": 400}
    (run / "eval" / "random.json").write_text(json.dumps(narrow))
    card = make_card.build_card(run, data, "chess-small-av", train_minutes=45)
    assert "Misses the aim to beat the random mover (score 0.525, Elo difference +17 ± 64)" in card["limitations"]
    played_out = narrow | {"adjudication_time": None}
    (run / "eval" / "random.json").write_text(json.dumps(played_out))
    with pytest.raises(SystemExit, match="different rules"):
        make_card.build_card(run, data, "chess-small-av", train_minutes=45)
