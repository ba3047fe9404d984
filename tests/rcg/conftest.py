"""Shared fixtures of the RCG tests: the official tiny checkpoints, converted once per session."""

from pathlib import Path

import pytest
import torch
from rcg_testdata import FIXTURES, TINY


@pytest.fixture(autouse=True)
def one_thread():
    """The RCG test networks are tiny: one intra-op thread avoids oversubscription on the shared 2 cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def converted(tmp_path_factory) -> dict[str, Path]:
    """Zoo repo folders converted from every official tiny checkpoint (and the tiny pipelines)."""
    from zoo.rcg.convert import convert_files

    root = tmp_path_factory.mktemp("rcg_converted")
    sources = {
        "moco": [FIXTURES / "encoder_tiny" / "moco_vit_tiny.pth.tar"],
        "rdm": [FIXTURES / "rdm_tiny" / "rdm_ckpt.pth"],
        "rdm_cc": [FIXTURES / "rdm_tiny_cc" / "rdm_ckpt.pth"],
        "vqgan": [FIXTURES / "vqgan_tiny" / "vqgan_tiny.ckpt"],
        "mage": [FIXTURES / "mage_tiny" / "mage_ckpt.pth"],
        "pipeline": [FIXTURES / "mage_tiny" / "mage_ckpt.pth", FIXTURES / "rdm_tiny" / "rdm_ckpt.pth"],
        "pipeline_cc": [FIXTURES / "mage_tiny" / "mage_ckpt.pth", FIXTURES / "rdm_tiny_cc" / "rdm_ckpt.pth"],
    }
    out = {}
    for name, paths in sources.items():
        out[name] = root / name
        convert_files(paths, out[name], TINY)
    return out


@pytest.fixture(scope="session")
def pipeline(converted):
    import zoo

    return zoo.load(converted["pipeline"])


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> Path:
    """A tiny ImageFolder (train/ and val/, two classes) of smooth random 40x40 images."""
    import numpy as np
    from PIL import Image

    root = tmp_path_factory.mktemp("rcg_images")
    rng = np.random.default_rng(0)
    for split, n in (("train", 8), ("val", 4)):
        for cls in ("a", "b"):
            folder = root / split / cls
            folder.mkdir(parents=True)
            for i in range(n // 2):
                base = rng.uniform(0, 255, size=(5, 5, 3))
                img = Image.fromarray(base.astype(np.uint8)).resize((40, 40), Image.BICUBIC)
                img.save(folder / f"{i}.png")
    return root
