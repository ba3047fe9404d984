"""The RCG pipeline on the converted tiny official checkpoints: sample, reconstruct, encode, CLI."""

import pytest
import torch
from rcg_testdata import io, max_err

import zoo
from zoo.cli import main
from zoo.rcg.pipeline import RCGPipeline

FAST = dict(rdm_steps=10, steps=4)


def test_pipeline_loads_with_the_mage_encoder_and_ema_rdm(converted, pipeline):
    assert isinstance(pipeline, RCGPipeline)
    assert pipeline.hparams.image_size == 32
    rdm_stage = zoo.load(converted["rdm"])
    for name, value in rdm_stage.ema.shadow.state_dict().items():  # sampling uses the EMA weights
        assert torch.equal(pipeline.rdm.denoiser.state_dict()[name], value)
    data = io("encoder_tiny")
    assert max_err(pipeline.encode(data["images"]), data["rep"]) <= 1e-5


def test_sample_shape_range_and_determinism(pipeline):
    a = pipeline.sample(3, seed=7, **FAST)
    assert a.shape == (3, 3, 32, 32) and a.dtype == torch.float32
    assert a.min() >= 0 and a.max() <= 1
    assert torch.equal(a, pipeline.sample(3, seed=7, **FAST))
    assert not torch.equal(a, pipeline.sample(3, seed=8, **FAST))
    pipeline.train()  # e.g. right after Trainer.fit: sampling still runs without dropout
    try:
        assert torch.equal(a, pipeline.sample(3, seed=7, **FAST)) and pipeline.mage.training
    finally:
        pipeline.eval()
    batched = pipeline.sample(3, seed=7, batch_size=2, **FAST)
    assert torch.equal(batched, pipeline.sample(3, seed=7, batch_size=2, **FAST))


def test_cfg_and_temperature_change_samples_and_timings_split(pipeline):
    timings = {}
    plain = pipeline.sample(2, seed=1, cfg=0.0, **FAST)
    guided = pipeline.sample(2, seed=1, cfg=3.0, timings=timings, **FAST)
    assert not torch.equal(plain, guided)
    assert set(timings) == {"rdm", "mage", "vqgan"} and all(t > 0 for t in timings.values())


def test_generation_uses_the_representation(pipeline):
    """Given identical randomness, different representations give different token maps."""
    data = io("mage_tiny")
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    a = pipeline.generate_tokens(data["gen_image_rep"], cfg=0.0, steps=6, temperature=6.0, generator=g())
    b = pipeline.generate_tokens(-data["gen_image_rep"], cfg=0.0, steps=6, temperature=6.0, generator=g())
    assert a.shape == (2, 256) and a.max() < pipeline.mage.config.codebook_size
    assert not torch.equal(a, b)
    out = pipeline.decode_tokens(a)
    assert out.shape == data["gen_image_out_seeded"].shape  # the official gen_image output shape


def test_reconstruct_and_bad_inputs(pipeline):
    images = io("mage_tiny")["images"]
    out = pipeline.reconstruct(images, steps=4, seed=0)
    assert out.shape == images.shape and 0 <= out.min() and out.max() <= 1
    assert torch.equal(out, pipeline.reconstruct(images, steps=4, seed=0))
    with pytest.raises(ValueError, match="32x32"):
        pipeline.reconstruct(torch.rand(1, 3, 64, 64))
    with pytest.raises(ValueError, match="uint8"):
        pipeline.encode((images * 255).to(torch.uint8))
    with pytest.raises(ValueError, match="unconditional"):
        pipeline.sample(2, labels=torch.tensor([0, 1]), **FAST)
    with pytest.raises(ValueError, match="rdm_steps"):
        pipeline.sample(1, rdm_steps=0)


def test_class_conditional_pipeline(converted):
    model = zoo.load(converted["pipeline_cc"])
    assert model.is_class_conditional
    a = model.sample(2, labels=torch.tensor([1, 4]), seed=0, **FAST)
    b = model.sample(2, labels=torch.tensor([2, 3]), seed=0, **FAST)
    assert a.shape == (2, 3, 32, 32) and not torch.equal(a, b)
    assert model.sample(2, seed=0, **FAST).shape == (2, 3, 32, 32)  # random classes
    with pytest.raises(ValueError, match="class ids"):
        model.sample(1, labels=torch.tensor([5]), **FAST)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_sampling(converted, dtype):
    model = zoo.load(converted["pipeline"], dtype=dtype)
    out = model.sample(2, seed=0, **FAST)
    assert out.dtype == torch.float32 and torch.isfinite(out).all() and 0 <= out.min() and out.max() <= 1
    rep = model.encode(io("encoder_tiny")["images"])
    assert max_err(rep, io("encoder_tiny")["rep"]) < 0.1  # a half-precision encoder stays close to fp32


def test_cli_sample_writes_a_png_grid(converted, tmp_path, capsys):
    from PIL import Image

    out = tmp_path / "grid.png"
    assert main(["rcg", "sample", str(converted["pipeline"]), "--n", "4", "--out", str(out), "--rdm-steps", "5",
                 "--steps", "3"]) == 0
    assert Image.open(out).size == (2 * 32 + 3 * 2, 2 * 32 + 3 * 2)  # 2x2 grid with 2-px padding
    cc = tmp_path / "cc.png"  # class-conditional: one label for all, or one per image
    assert main(["rcg", "sample", str(converted["pipeline_cc"]), "--n", "2", "--labels", "3", "--out", str(cc),
                 "--rdm-steps", "4", "--steps", "2"]) == 0
    assert cc.exists()
    capsys.readouterr()
    assert main(["rcg", "sample", str(converted["pipeline_cc"]), "--n", "3", "--labels", "1,2", "--out",
                 str(tmp_path / "x.png")]) == 2
    assert "1 or --n" in capsys.readouterr().err


def test_cli_reconstruct(converted, image_folder, tmp_path):
    from PIL import Image

    out = tmp_path / "rec.png"
    images = sorted((image_folder / "val").rglob("*.png"))[:2]  # 40x40: centre-cropped and resized to 32x32
    assert main(["rcg", "reconstruct", str(converted["pipeline"]), *map(str, images), "--out", str(out), "--steps",
                 "3", "--center-crop"]) == 0
    assert Image.open(out).size == (2 * 32 + 3 * 2, 2 * 32 + 3 * 2)  # inputs over generations


def test_cli_reconstruct_refuses_other_sizes_and_non_images(converted, tmp_path, capsys, monkeypatch):
    """One `zoo: error:` line each, as RCGPipeline.reconstruct refuses other sizes (the CLI used to crop silently)."""
    import numpy as np
    from PIL import Image

    from zoo.errors import InputError
    from zoo.rcg.cli import fit_size

    wide = tmp_path / "wide.png"
    Image.fromarray(np.zeros((50, 100, 3), np.uint8)).save(wide)
    out = tmp_path / "rec.png"
    argv = ["rcg", "reconstruct", str(converted["pipeline"]), str(wide), "--out", str(out), "--steps", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("zoo: error: ")
    assert f"{wide} is 100x50, but the model takes 32x32 images" in err[0] and "--center-crop" in err[0]
    assert not out.exists()
    # --center-crop takes the centre square: the left and right quarters of a 100x50 image are cut off
    striped = np.zeros((50, 100, 3), np.uint8)
    striped[:, 25:75] = 255
    cropped = np.asarray(fit_size(wide, Image.fromarray(striped), 32, center_crop=True))
    assert cropped.shape == (32, 32, 3) and cropped.min() == 255
    with pytest.raises(InputError, match="is 100x50"):
        fit_size(wide, Image.fromarray(striped), 32, center_crop=False)

    notes = tmp_path / "notes.txt"
    notes.write_text("not an image")
    monkeypatch.setattr(zoo, "load", lambda *a, **k: pytest.fail("the model loaded before the inputs were read"))
    for path, message in ((notes, f"{notes} is not an image file PIL can read"),
                          (tmp_path / "missing.png", "missing.png does not exist"),
                          (tmp_path, f"{tmp_path} is not an image file")):
        assert main(["rcg", "reconstruct", str(converted["pipeline"]), str(path), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("zoo: error: ") and message in err[0], err


def test_sampling_progress_moves_with_every_step(pipeline, capsys):
    """The bar counts RDM steps and MAGE iterations (it sat at 0/1 batches for minutes)."""
    from zoo.rcg.model import ddim_timesteps

    calls = []
    pipeline.generate_tokens(torch.randn(1, pipeline.mage.config.rep_dim), steps=3, on_step=lambda: calls.append("m"))
    pipeline.sample_representations(1, rdm_steps=10, on_step=lambda: calls.append("r"))
    assert calls == ["m"] * 3 + ["r"] * len(ddim_timesteps(10))
    capsys.readouterr()
    quiet = pipeline.sample(3, seed=0, batch_size=2, **FAST)
    assert capsys.readouterr().err == ""
    shown = pipeline.sample(3, seed=0, batch_size=2, progress=True, **FAST)
    total = 2 * (len(ddim_timesteps(FAST["rdm_steps"])) + FAST["steps"])  # two batches
    err = capsys.readouterr().err
    assert f"{total}/{total}" in err and "batch 2/2" in err
    assert torch.equal(quiet, shown)  # the bar does not change the samples


def test_cli_assemble_writes_the_stages_as_one_pipeline(converted, pipeline, tmp_path):
    """`zoo rcg assemble` (RCGPipeline.from_stages): the MAGE stage's encoder and tokenizer, the RDM's EMA weights."""
    assert main(["rcg", "assemble", "--rdm", str(converted["rdm"]), "--mage", str(converted["mage"]),
                 "--out", str(tmp_path / "assembled"), "--sampling", '{"cfg": 0.5}']) == 0
    assembled = zoo.load(tmp_path / "assembled")
    assert isinstance(assembled, RCGPipeline) and assembled.sampling_defaults["cfg"] == 0.5
    reference = pipeline.state_dict()
    assert set(assembled.state_dict()) == set(reference)
    assert all(torch.equal(v, reference[k]) for k, v in assembled.state_dict().items())
    with pytest.raises(SystemExit, match="--rdm must be a trained rcg-rdm repo"):
        main(["rcg", "assemble", "--rdm", str(converted["mage"]), "--mage", str(converted["mage"]),
              "--out", str(tmp_path / "bad")])
    assert not (tmp_path / "bad").exists()


def test_half_precision_repo_computes_in_float32_unless_asked(converted, pipeline, tmp_path):
    zoo.load(converted["pipeline"]).to(torch.float16).save_pretrained(tmp_path / "fp16")
    loaded = zoo.load(tmp_path / "fp16")
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    half_rounded = {k: v.half().float() for k, v in pipeline.named_parameters()}
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in half_rounded.items())
    assert {p.dtype for p in zoo.load(tmp_path / "fp16", dtype="bfloat16").parameters()} == {torch.bfloat16}
