"""Image data for the RCG stages: an ImageFolder (ImageNet layout) or Fashion-MNIST's idx files.

Each stage sees the official preprocessing: [0, 1] tensors without normalisation for the tokenizer, RDM and
MAGE (the encoder normalises internally), two augmented normalised views for MoCo v3 pretraining.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import torch
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from torch.utils.data import DataLoader, Dataset

from zoo._lightning import L
from zoo.lightning_compat import MidEpochResume
from zoo.training import resumable_loader

__all__ = ["ImageDataModule", "FashionMNIST", "stage_transform", "STAGES"]

STAGES = ("mocov3", "vqgan", "rdm", "mage", "eval")
FASHION_MNIST_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                       "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _read_idx(root: Path, stem: str) -> np.ndarray:
    path = next((root / name for name in (stem + ".gz", stem) if (root / name).is_file()), None)
    if path is None:
        raise FileNotFoundError(f"{stem}[.gz] not found under {root} (Debian: apt-get install dataset-fashion-mnist)")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = bytearray(f.read())  # writable, so torch.from_numpy can share it
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


class FashionMNIST(Dataset):
    """Fashion-MNIST from its idx files, as RGB PIL images (grey replicated) with labels."""

    def __init__(self, root: str | os.PathLike = "/usr/share/datasets/fashion-mnist", split: str = "train",
                 transform=None):
        if split not in FASHION_MNIST_FILES:
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        root = Path(root)
        images, labels = FASHION_MNIST_FILES[split]
        self.images = _read_idx(root, images)  # (N, 28, 28) uint8
        self.labels = _read_idx(root, labels).astype(np.int64)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        from PIL import Image

        image = Image.fromarray(self.images[i], mode="L").convert("RGB")
        return (self.transform(image) if self.transform else image), int(self.labels[i])


class TwoCrops:
    """Two independently augmented views (MoCo v3)."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __call__(self, image):
        return [self.first(image), self.second(image)]


def stage_transform(stage: str, image_size: int, *, small_images: bool = False):
    """The official per-stage preprocessing. ``small_images`` adapts it to tiny grey images (Fashion-MNIST): no
    crop for the generators, and for MoCo v3 milder crops, brightness/contrast jitter only, no blur/solarisation."""
    from torchvision import transforms as T

    bicubic = T.InterpolationMode.BICUBIC
    if small_images and stage in ("mage", "eval"):
        return T.Compose([T.Resize(image_size, interpolation=bicubic), T.ToTensor()])
    if small_images and stage in ("rdm", "vqgan"):
        return T.Compose([T.Resize(image_size, interpolation=bicubic), T.RandomHorizontalFlip(), T.ToTensor()])
    if stage == "mage" or stage == "eval":  # MAGE "noaug": resize shorter side to 292/256 * size, center crop
        return T.Compose([T.Resize(round(image_size * 292 / 256), interpolation=bicubic), T.CenterCrop(image_size),
                          T.ToTensor()])
    if stage in ("rdm", "vqgan"):
        return T.Compose([T.Resize(image_size, interpolation=bicubic), T.RandomCrop(image_size),
                          T.RandomHorizontalFlip(), T.ToTensor()])
    if stage == "mocov3":
        scale = (0.2, 1.0) if small_images else (0.08, 1.0)
        normalize = T.Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD)

        def view(blur_p: float, solarize_p: float):
            ops = [T.RandomResizedCrop(image_size, scale=scale, interpolation=bicubic)]
            if small_images:  # grey images: brightness/contrast only (hue/saturation would add colour)
                ops.append(T.RandomApply([T.ColorJitter(0.4, 0.4)], p=0.8))
            else:
                ops += [T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8), T.RandomGrayscale(p=0.2),
                        T.RandomApply([T.GaussianBlur(23, sigma=(0.1, 2.0))], p=blur_p),
                        T.RandomSolarize(128, p=solarize_p)]
            return T.Compose([*ops, T.RandomHorizontalFlip(), T.ToTensor(), normalize])

        return TwoCrops(view(1.0, 0.0), view(0.1, 0.2))
    raise ValueError(f"unknown stage {stage!r}; one of {STAGES}")


class ImageDataModule(MidEpochResume, L.LightningDataModule):
    """Images for one RCG stage.

    ``dataset``: ``"imagefolder"`` (``root``/train/<class>/*.JPEG, optional ``root``/val) or ``"fashion-mnist"``
    (``root`` holds the idx files). Batches are ``(images, labels)``; for ``stage="mocov3"`` images is a pair of
    views. Training images come in a new order each epoch, drawn from ``seed``; a run resumed from a mid-epoch
    checkpoint goes on with the batches it had left."""

    def __init__(self, root: str, stage: str = "mage", dataset: str = "imagefolder", image_size: int = 256,
                 batch_size: int = 64, num_workers: int = 8, small_images: bool = False, val: bool = False,
                 limit: int | None = None, seed: int = 0):
        super().__init__()
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; one of {STAGES}")
        if dataset not in ("imagefolder", "fashion-mnist"):
            raise ValueError(f"dataset must be 'imagefolder' or 'fashion-mnist', got {dataset!r}")
        self.save_hyperparameters()

    def _dataset(self, split: str):
        h = self.hparams
        transform = stage_transform(h.stage if split == "train" else "eval", h.image_size, small_images=h.small_images)
        if h.dataset == "fashion-mnist":
            ds = FashionMNIST(h.root, "train" if split == "train" else "test", transform)
        else:
            from torchvision.datasets import ImageFolder

            folder = Path(h.root) / split
            if not folder.is_dir():
                raise FileNotFoundError(f"{folder} not found: ImageFolder data needs {h.root}/{split}/<class>/<image>")
            ds = ImageFolder(str(folder), transform=transform)
        if h.limit:
            g = torch.Generator().manual_seed(h.seed)
            ds = torch.utils.data.Subset(ds, torch.randperm(len(ds), generator=g)[: h.limit].tolist())
        return ds

    def setup(self, stage: str | None = None) -> None:
        self.train_set = self._dataset("train")
        self.val_set = self._dataset("val" if self.hparams.dataset == "imagefolder" else "test") if self.hparams.val else None

    def _loader_options(self) -> dict:
        h = self.hparams
        return {"num_workers": h.num_workers, "pin_memory": torch.cuda.is_available(),
                "persistent_workers": h.num_workers > 0}

    def train_dataloader(self) -> DataLoader:
        h = self.hparams
        return resumable_loader(self.train_set, h.batch_size, shuffle=True, seed=h.seed, drop_last=True,
                                resume_at=self.take_resume_at(), **self._loader_options())

    def val_dataloader(self):
        if self.val_set is None:
            return []
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size, **self._loader_options())
