"""``zoo rcg sample | reconstruct | eval | tokenizer-fid | ref-stats | assemble`` and ``zoo convert rcg``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from zoo._cli import Commands, ModelOptions, Options, arg, load_model, option, print_json

rcg = Commands("rcg", "RCG: sample, reconstruct, evaluate FID")
register_cli = rcg.register_cli


def save_grid(images, path: str | Path, nrow: int | None = None) -> None:
    """Write (B, 3, H, W) images in [0, 1] as one PNG grid (atomically), a square one unless ``nrow`` is given."""
    import math

    from torchvision.utils import save_image

    from zoo.io import atomic_path

    with atomic_path(path) as tmp:
        save_image(images.float().clamp(0, 1).cpu(), str(tmp), nrow=nrow or max(1, math.ceil(math.sqrt(len(images)))),
                   format="png")


def _labels(text: str | None, n: int):
    """'3' (every image of class 3) or '1,2,...' (one class id per image) -> tensor, or None."""
    if not text:
        return None
    import torch

    try:
        ids = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--labels must be class ids separated by commas, got {text!r}") from None
    if len(ids) not in (1, n):
        raise ValueError(f"--labels needs 1 or --n ({n}) class ids, got {len(ids)}")
    return torch.tensor(ids * n if len(ids) == 1 else ids)


def read_images(paths) -> list:
    """Image files as RGB PIL images; a file that is missing or not an image is an InputError naming it."""
    from PIL import Image

    from zoo.errors import InputError

    images = []
    for path in paths:
        try:
            with Image.open(path) as img:
                images.append(img.convert("RGB"))
        except FileNotFoundError:
            raise InputError(f"{path} does not exist") from None
        except OSError as err:  # PIL's UnidentifiedImageError, a truncated image, a folder
            raise InputError(f"{path} is not an image file PIL can read ({err}); give PNG, JPEG or other "
                             "images") from None
    return images


def fit_size(path, img, size: int, center_crop: bool):
    """``img`` if it is size x size; with ``center_crop`` its centre square resized to that; else an InputError
    (as RCGPipeline.reconstruct rejects other sizes: a silent crop or squash would hide what the model saw)."""
    from PIL import Image

    from zoo.errors import InputError

    if img.size == (size, size):
        return img
    if not center_crop:
        raise InputError(f"{path} is {img.width}x{img.height}, but the model takes {size}x{size} images: resize it "
                         f"first, or pass --center-crop to cut out its centre square and resize that to {size}x{size}")
    side = min(img.size)
    left, top = (img.width - side) // 2, (img.height - side) // 2
    return img.crop((left, top, left + side, top + side)).resize((size, size), Image.BICUBIC)


class Tokenizer(ModelOptions):
    name: str = arg("an RCG VQGAN, MAGE or pipeline repo folder or catalog name")
    dtype: str | None = option(None, "float32 (default), bfloat16 or float16")


class Pipeline(Tokenizer):
    name: str = arg("catalog name (e.g. rcg-imagenet256) or a local rcg-pipeline repo folder")
    cfg: float | None = option(None, "classifier-free guidance scale (linearly ramped); default: the model's")
    rdm_steps: int | None = option(None, "DDIM steps of the representation diffusion model")
    eta: float | None = option(None, "DDIM eta (1.0 in the paper)")
    steps: int | None = option(None, "MAGE decoding iterations")
    temperature: float | None = option(None, "MAGE choice temperature")
    seed: int = option(0, "random seed of the sampling")

    def load(self):
        model = load_model(self)
        if not hasattr(model, "sample"):
            raise ValueError(f"{self.name} is a {type(model).__name__}; `zoo rcg` needs an RCG pipeline (rcg-pipeline)")
        return model

    def sampling(self) -> dict:
        """The sampling options given (the rest: the model's defaults)."""
        return {k: getattr(self, k) for k in ("cfg", "rdm_steps", "steps", "temperature", "eta")
                if getattr(self, k) is not None}


@rcg.command("sample", "sample images into a PNG grid")
class Sample(Pipeline):
    n: int = option(16, "images to sample")
    out: str = option("grid.png", "PNG grid to write")
    batch_size: int | None = option(None, "images per forward pass (default: all --n at once)")
    nrow: int | None = option(None, "images per grid row (default: a square grid)")
    labels: str | None = option(None, "class-conditional models: one class id, or one per image (comma-separated)")

    def run(self) -> None:
        images = self.load().sample(self.n, seed=self.seed, batch_size=self.batch_size, progress=True,
                                    labels=_labels(self.labels, self.n), **self.sampling())
        save_grid(images, self.out, self.nrow)
        print(f"wrote {self.out}: {self.n} samples of {self.name} ({images.shape[-1]}x{images.shape[-2]})")


@rcg.command("reconstruct", "generate from the representations of given images")
class Reconstruct(Pipeline):
    images: list[str] = arg("image files (the model's resolution)")
    out: str = option("reconstruct.png", "PNG grid to write: the inputs, then their generations")
    center_crop: bool = option(False, "cut out the centre square of an image of another size and resize it to the "
                               "model's size (without it, such an image is an error, as in RCGPipeline.reconstruct)")

    def run(self) -> None:
        import torch
        from torchvision.transforms.functional import to_tensor

        pictures = read_images(self.images)  # before the model loads: a wrong file fails at once
        model = self.load()
        size = model.image_size  # a property, so that a BitDelta of the pipeline has it too
        batch = torch.stack([to_tensor(fit_size(path, img, size, self.center_crop))
                             for path, img in zip(self.images, pictures)])
        out = model.reconstruct(batch, seed=self.seed, **self.sampling())
        save_grid(torch.cat([batch, out.cpu()]), self.out, nrow=len(pictures))
        print(f"wrote {self.out}: inputs (top row) and generations from their representations (bottom row)")


@rcg.command("eval", "FID of samples against reference statistics or a folder of images")
class Eval(Pipeline):
    n: int = option(50000, "samples to generate")
    batch_size: int = option(50, "images per forward pass")
    ref_stats: str | None = option(help="mu/sigma .npz (e.g. ADM's ImageNet 256 reference statistics)", one_of="ref")
    ref_images: str | None = option(help="folder of real images", one_of="ref")
    save_ref_stats: str | None = option(None, "with --ref-images: also write their mu/sigma .npz")
    inception_score: bool = option(False, "also compute IS (needs classifier weights)")
    out: str | None = option(None, "write the metrics as JSON")
    cache_dir: str | None = option(None, "keep per-batch sample features here; a rerun resumes from them")

    def run(self) -> None:
        from zoo.rcg.eval import evaluate_fid

        result = evaluate_fid(self.load(), n=self.n, batch_size=self.batch_size, seed=self.seed,
                              ref_stats=self.ref_stats, ref_images=self.ref_images,
                              save_ref_stats=self.save_ref_stats, inception_score=self.inception_score,
                              cache_dir=self.cache_dir, **self.sampling())
        print_json({**result, "model": self.name}, self.out)


class Images(Options):
    folder: str | None = arg("folder of real images", None)
    fashion_mnist: Literal["train", "test"] | None = option(None, "use this Fashion-MNIST split instead")
    root: str = option("/usr/share/datasets/fashion-mnist", "Fashion-MNIST idx folder")

    def __post_init__(self) -> None:
        if (self.folder is None) == (self.fashion_mnist is None):
            raise SystemExit("give a folder of images or --fashion-mnist train|test (not both)")


def _fashion_mnist(o: Images):
    """The --fashion-mnist split as uint8 RGB images (N, 3, 28, 28), the grey channel repeated."""
    import torch

    from zoo.rcg.data import FashionMNIST

    return torch.from_numpy(FashionMNIST(o.root, o.fashion_mnist).images)[:, None].expand(-1, 3, -1, -1)


@rcg.command("tokenizer-fid", "FID of the tokenizer's reconstructions of real images (a generator's floor)")
class TokenizerFID(Images, Tokenizer):
    folder: str | None = arg("folder of real images (the first --n are used)", None)
    fashion_mnist: Literal["train", "test"] | None = option(None, "use --n random images of this split instead")
    n: int = option(2000, "real images to reconstruct")
    seed: int = option(0, "which Fashion-MNIST images (numpy default_rng(seed).choice)")
    ref_stats: str = option(help="mu/sigma .npz of the reference images (zoo rcg ref-stats)")
    batch_size: int = option(50, "images per forward pass")
    out: str | None = option(None, "write the metrics as JSON")

    def run(self) -> None:
        import numpy as np
        import torch

        from zoo.rcg.eval import evaluate_tokenizer_fid, iter_image_folder

        model = load_model(self)
        tokenizer = getattr(model, "vqgan", None)
        if tokenizer is None:
            raise SystemExit(f"{self.name} is a {type(model).__name__} without a tokenizer; give an RCG VQGAN, MAGE "
                             "or pipeline repo")
        if self.fashion_mnist is not None:
            pool = _fashion_mnist(self)
            if not 0 < self.n <= len(pool):
                raise SystemExit(f"--n must lie in 1..{len(pool)} for Fashion-MNIST {self.fashion_mnist}")
            images = pool[np.random.default_rng(self.seed).choice(len(pool), self.n, replace=False)]
            source = f"fashion-mnist:{self.fashion_mnist}, {self.n} images drawn with seed {self.seed}"
        else:
            images = torch.cat(list(iter_image_folder(self.folder, limit=self.n)))
            source = f"{self.folder}, the first {images.shape[0]} images"
        result = evaluate_tokenizer_fid(tokenizer, images, ref_stats=self.ref_stats, batch_size=self.batch_size)
        print_json({**result, "model": self.name, "images": source}, self.out)


def _reference_batches(o: RefStats):
    """(name, uint8 batches) of the images ref-stats reads: a folder, or a Fashion-MNIST split."""
    from zoo.rcg.eval import iter_image_folder

    if o.fashion_mnist is None:
        return str(o.folder), iter_image_folder(o.folder, o.batch_size)
    return f"fashion-mnist:{o.fashion_mnist}", _fashion_mnist(o).split(o.batch_size)


@rcg.command("ref-stats", "FID reference statistics (mu/sigma .npz) of a folder of images")
class RefStats(Images):
    out: str = option(help="the .npz to write")
    batch_size: int = option(100, "images per forward pass")
    cache_dir: str | None = option(None, "keep per-batch features here; a rerun resumes from them")
    device: str = option("cpu", "torch device")

    def run(self) -> None:
        import torch
        from tqdm.auto import tqdm

        from zoo.rcg.eval import FeatureCache, InceptionFeatures, cached_features, save_reference_stats

        source, batches = _reference_batches(self)
        size = self.batch_size
        cache = FeatureCache(self.cache_dir, {"images": source, "batch_size": size}) if self.cache_dir else None
        net = InceptionFeatures().to(self.device)
        feats = torch.cat([cached_features(cache, i * size, len(batch), lambda: net(batch.to(self.device)).cpu())
                           for i, batch in enumerate(tqdm(batches, desc="reference features", unit="batch"))])
        save_reference_stats(self.out, feats)
        print(f"wrote {self.out}: mu/sigma of {feats.shape[0]} images ({source})")


@rcg.command("assemble", "join trained stages (an RDM and a conditioned MAGE repo) into a pipeline")
class Assemble(Options):
    rdm: str = option(help="rcg-rdm repo folder (its EMA weights are used)")
    mage: str = option(help="rcg-mage repo folder (brings the encoder and tokenizer)")
    out: str = option(help="output repo folder")
    sampling: str | None = option(None, 'JSON of sampling defaults, e.g. \'{"cfg": 2.0, "temperature": 4.5}\'')

    def run(self) -> None:
        import zoo
        from zoo.rcg.module import MAGEModule, RDMModule
        from zoo.rcg.pipeline import RCGPipeline

        rdm, mage = zoo.load(self.rdm), zoo.load(self.mage)
        for model, kind, flag in ((rdm, RDMModule, "--rdm"), (mage, MAGEModule, "--mage")):
            if not isinstance(model, kind):
                raise SystemExit(f"{flag} must be a trained {kind.model_type} repo, got a {model.model_type}")
        pipeline = RCGPipeline.from_stages(rdm, mage, sampling=json.loads(self.sampling) if self.sampling else None)
        names = pipeline.save_pretrained(self.out)
        print(f"wrote {self.out} ({', '.join(names)}): RCG pipeline of {self.rdm} (EMA) + {self.mage}; "
              f"sample with `zoo rcg sample {self.out}`")


@rcg.command(None, "official MoCo v3 / MAGE / RDM / VQGAN checkpoints -> zoo repos")
class Convert(Options):
    src: list[str] = arg("one checkpoint (-> its stage), or a MAGE + an RDM checkpoint (-> pipeline)")
    out: str = option(help="output repo folder")
    config: str | None = option(None, "JSON (or JSON file) of config overrides, e.g. '{\"encoder\": {\"num_heads\": "
                                "2}}'")

    def run(self) -> None:
        from zoo.rcg.convert import convert_files

        try:
            text = Path(self.config).read_text() if self.config and Path(self.config).is_file() else self.config
            config = json.loads(text) if text else None
        except json.JSONDecodeError as err:
            raise ValueError(f"--config must be JSON or a JSON file: {err}") from None
        module = convert_files(self.src, self.out, config)
        print(f"wrote {self.out}: {type(module).__name__} ({module.model_type}); load it with "
              f"zoo.load({str(self.out)!r})")
