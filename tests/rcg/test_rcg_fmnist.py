"""The Fashion-MNIST recipes of rcg-fashionmnist, each run for a few steps and published in the order
recipes/rcg/build_fmnist.sh runs them, then assembled into a pipeline that samples."""

import os
from pathlib import Path

import pytest
import torch

import zoo
from zoo.cli import main
from zoo.train import run_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "rcg"
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
STAGES = ("mocov3", "vqgan", "rdm", "mage", "mage_baseline")
FEW_STEPS = ["--trainer.max_steps=2", "--data.init_args.batch_size=8", "--data.init_args.num_workers=0",
             "--trainer.limit_val_batches=1", "--trainer.num_sanity_val_steps=0"]

pytestmark = pytest.mark.skipif(not (FASHION_MNIST / "train-images-idx3-ubyte.gz").exists(),
                                reason="needs Debian's dataset-fashion-mnist")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every stage trained 2 steps from its recipe (whose paths are relative: runs/rcg/<stage>) and published."""
    root = tmp_path_factory.mktemp("fmnist")
    cwd = Path.cwd()
    losses = {}
    try:
        os.chdir(root)
        for stage in STAGES:
            cli = run_recipe(RECIPES / f"fmnist_{stage}.yaml", FEW_STEPS)
            assert cli.trainer.global_step == 2, stage
            losses[stage] = {k: float(v) for k, v in cli.trainer.callback_metrics.items()}
            zoo.publish(f"runs/rcg/{stage}/checkpoints/last.ckpt", f"runs/rcg/{stage}/repo")
    finally:
        os.chdir(cwd)
    return root / "runs" / "rcg", losses


def _prefixed(model, prefix):
    return {k[len(prefix):]: v for k, v in model.state_dict().items() if k.startswith(prefix)}


def test_each_stage_trains_and_publishes(runs):
    folder, losses = runs
    for stage in STAGES:
        assert all(torch.isfinite(torch.tensor(v)) for v in losses[stage].values()), (stage, losses[stage])
        model = zoo.load(folder / stage / "repo")
        assert model.model_type == f"rcg-{stage.split('_')[0]}", stage
    assert "train/loss" in losses["mage"] and "train/loss" in losses["mage_baseline"]


def test_later_stages_start_from_the_published_frozen_parts(runs):
    folder, _ = runs
    encoder = _prefixed(zoo.load(folder / "mocov3" / "repo"), "encoder.")
    vqgan = _prefixed(zoo.load(folder / "vqgan" / "repo"), "vqgan.")
    rdm, mage, baseline = (zoo.load(folder / s / "repo") for s in ("rdm", "mage", "mage_baseline"))
    for model in (rdm, mage):
        assert all(torch.equal(v, encoder[k]) for k, v in _prefixed(model, "encoder.").items())
    for model in (mage, baseline):
        assert all(torch.equal(v, vqgan[k]) for k, v in _prefixed(model, "vqgan.").items())
    assert baseline.encoder is None and not baseline.mage.config.use_rep


def test_assembled_pipeline_and_baseline_sample_28px_images(runs, tmp_path):
    folder, _ = runs
    assert main(["rcg", "assemble", "--rdm", str(folder / "rdm" / "repo"), "--mage", str(folder / "mage" / "repo"),
                 "--out", str(tmp_path / "pipeline")]) == 0
    pipeline = zoo.load(tmp_path / "pipeline")
    images = pipeline.sample(2, rdm_steps=4, steps=2, cfg=1.0, seed=0)
    assert images.shape == (2, 3, 28, 28) and 0 <= images.min() and images.max() <= 1
    assert torch.equal(images, pipeline.sample(2, rdm_steps=4, steps=2, cfg=1.0, seed=0))
    baseline = zoo.load(folder / "mage_baseline" / "repo").sample(2, steps=2, seed=0)
    assert baseline.shape == (2, 3, 28, 28)
