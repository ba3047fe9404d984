"""``zoo rcg sample | reconstruct | eval | tokenizer-fid | ref-stats | assemble`` and ``zoo convert rcg``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from zoo._cli import ModelOptions, arg, command, commands, load_model, option, options, print_json


@options
class TokenizerOptions(ModelOptions):
    name: str = arg("an RCG VQGAN, MAGE or pipeline repo folder or catalog name")
    dtype: str | None = option(None, "float32 (default), bfloat16 or float16")


@options
class PipelineOptions(TokenizerOptions):
    """A pipeline to sample from, and how."""

    name: str = arg("catalog name (e.g. rcg-imagenet256) or a local rcg-pipeline repo folder")
    cfg: float | None = option(None, "classifier-free guidance scale (linearly ramped); default: the model's")
    rdm_steps: int | None = option(None, "DDIM steps of the representation diffusion model")
    eta: float | None = option(None, "DDIM eta (1.0 in the paper)")
    steps: int | None = option(None, "MAGE decoding iterations")
    temperature: float | None = option(None, "MAGE choice temperature")
    seed: int = option(0, "random seed of the sampling")


def _load(o: PipelineOptions):
    model = load_model(o)
    if not hasattr(model, "sample"):
        raise ValueError(f"{o.name} is a {type(model).__name__}; `zoo rcg` needs an RCG pipeline (rcg-pipeline)")
    return model


def _sampling_kwargs(o: PipelineOptions) -> dict:
    keys = ("cfg", "rdm_steps", "steps", "temperature", "eta")
    return {k: getattr(o, k) for k in keys if getattr(o, k) is not None}


def save_grid(images, path: str | Path, nrow: int | None = None) -> None:
    """Write (B, 3, H, W) images in [0, 1] as one PNG grid (atomically)."""
    import math

    from torchvision.utils import save_image

    from zoo.io import atomic_path

    nrow = nrow or max(1, math.ceil(math.sqrt(images.shape[0])))
    with atomic_path(path) as tmp:
        save_image(images.float().clamp(0, 1).cpu(), str(tmp), nrow=nrow, padding=2, format="png")


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


@options
class SampleOptions(PipelineOptions):
    n: int = option(16, "images to sample")
    out: str = option("grid.png", "PNG grid to write")
    batch_size: int | None = option(None, "images per forward pass (default: all --n at once)")
    nrow: int | None = option(None, "images per grid row (default: a square grid)")
    labels: str | None = option(None, "class-conditional models: one class id, or one per image (comma-separated)")


def cmd_sample(o: SampleOptions) -> None:
    model = _load(o)
    images = model.sample(o.n, seed=o.seed, batch_size=o.batch_size, progress=True, labels=_labels(o.labels, o.n),
                          **_sampling_kwargs(o))
    save_grid(images, o.out, o.nrow)
    print(f"wrote {o.out}: {o.n} samples of {o.name} ({images.shape[-1]}x{images.shape[-2]})")


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


@options
class ReconstructOptions(PipelineOptions):
    images: list[str] = arg("image files (the model's resolution)")
    out: str = option("reconstruct.png", "PNG grid to write: the inputs, then their generations")
    center_crop: bool = option(False, "cut out the centre square of an image of another size and resize it to the "
                               "model's size (without it, such an image is an error, as in RCGPipeline.reconstruct)")


def cmd_reconstruct(o: ReconstructOptions) -> None:
    import numpy as np
    import torch

    pictures = read_images(o.images)  # before the model loads: a wrong file fails at once
    model = _load(o)
    size = model.image_size  # a property, so that a BitDelta of the pipeline has it too
    images = [torch.from_numpy(np.array(fit_size(path, img, size, o.center_crop))).permute(2, 0, 1).float() / 255
              for path, img in zip(o.images, pictures)]
    batch = torch.stack(images)
    out = model.reconstruct(batch, seed=o.seed, **_sampling_kwargs(o))
    save_grid(torch.cat([batch, out.cpu()]), o.out, nrow=len(images))
    print(f"wrote {o.out}: inputs (top row) and generations from their representations (bottom row)")


@options
class EvalOptions(PipelineOptions):
    n: int = option(50000, "samples to generate")
    batch_size: int = option(50, "images per forward pass")
    ref_stats: str | None = option(help="mu/sigma .npz (e.g. ADM's ImageNet 256 reference statistics)", one_of="ref")
    ref_images: str | None = option(help="folder of real images", one_of="ref")
    save_ref_stats: str | None = option(None, "with --ref-images: also write their mu/sigma .npz")
    inception_score: bool = option(False, "also compute IS (needs classifier weights)")
    out: str | None = option(None, "write the metrics as JSON")
    cache_dir: str | None = option(None, "keep per-batch sample features here; a rerun resumes from them")


def cmd_eval(o: EvalOptions) -> None:
    from zoo.rcg.eval import evaluate_fid

    result = evaluate_fid(_load(o), n=o.n, batch_size=o.batch_size, seed=o.seed, ref_stats=o.ref_stats,
                          ref_images=o.ref_images, save_ref_stats=o.save_ref_stats,
                          inception_score=o.inception_score, cache_dir=o.cache_dir, **_sampling_kwargs(o))
    result["model"] = o.name
    print_json(result, o.out)


@options
class ImagesOptions:
    """Real images: a folder, or a Fashion-MNIST split."""

    folder: str | None = arg("folder of real images", None)
    fashion_mnist: Literal["train", "test"] | None = option(None, "use this Fashion-MNIST split instead")
    root: str = option("/usr/share/datasets/fashion-mnist", "Fashion-MNIST idx folder")

    def __post_init__(self) -> None:
        if (self.folder is None) == (self.fashion_mnist is None):
            raise SystemExit("give a folder of images or --fashion-mnist train|test (not both)")


def _fashion_mnist(o: ImagesOptions):
    """The --fashion-mnist split as uint8 RGB images (N, 3, 28, 28), the grey channel repeated."""
    import torch

    from zoo.rcg.data import FashionMNIST

    return torch.from_numpy(FashionMNIST(o.root, o.fashion_mnist).images)[:, None].expand(-1, 3, -1, -1)


@options
class TokenizerFIDOptions(ImagesOptions, TokenizerOptions):
    folder: str | None = arg("folder of real images (the first --n are used)", None)
    fashion_mnist: Literal["train", "test"] | None = option(None, "use --n random images of this split instead")
    n: int = option(2000, "real images to reconstruct")
    seed: int = option(0, "which Fashion-MNIST images (numpy default_rng(seed).choice)")
    ref_stats: str = option(help="mu/sigma .npz of the reference images (zoo rcg ref-stats)")
    batch_size: int = option(50, "images per forward pass")
    out: str | None = option(None, "write the metrics as JSON")


def cmd_tokenizer_fid(o: TokenizerFIDOptions) -> None:
    import numpy as np
    import torch

    from zoo.rcg.eval import evaluate_tokenizer_fid, iter_image_folder

    model = load_model(o)
    tokenizer = getattr(model, "vqgan", None)
    if tokenizer is None:
        raise SystemExit(f"{o.name} is a {type(model).__name__} without a tokenizer; give an RCG VQGAN, MAGE or "
                         "pipeline repo")
    if o.fashion_mnist is not None:
        pool = _fashion_mnist(o)
        if not 0 < o.n <= len(pool):
            raise SystemExit(f"--n must lie in 1..{len(pool)} for Fashion-MNIST {o.fashion_mnist}")
        images = pool[np.random.default_rng(o.seed).choice(len(pool), o.n, replace=False)]
        source = f"fashion-mnist:{o.fashion_mnist}, {o.n} images drawn with seed {o.seed}"
    else:
        images = torch.cat(list(iter_image_folder(o.folder, limit=o.n)))
        source = f"{o.folder}, the first {images.shape[0]} images"
    result = evaluate_tokenizer_fid(tokenizer, images, ref_stats=o.ref_stats, batch_size=o.batch_size)
    result.update(model=o.name, images=source)
    print_json(result, o.out)


@options
class RefStatsOptions(ImagesOptions):
    out: str = option(help="the .npz to write")
    batch_size: int = option(100, "images per forward pass")
    cache_dir: str | None = option(None, "keep per-batch features here; a rerun resumes from them")
    device: str = option("cpu", "torch device")


def _reference_batches(o: RefStatsOptions):
    """(name, uint8 batches) of the images ref-stats reads: a folder, or a Fashion-MNIST split."""
    from zoo.rcg.eval import iter_image_folder

    if o.fashion_mnist is None:
        return str(o.folder), iter_image_folder(o.folder, o.batch_size)
    images = _fashion_mnist(o)
    return f"fashion-mnist:{o.fashion_mnist}", (images[i:i + o.batch_size] for i in range(0, len(images), o.batch_size))


def cmd_ref_stats(o: RefStatsOptions) -> None:
    import torch
    from tqdm.auto import tqdm

    from zoo.rcg.eval import FeatureCache, InceptionFeatures, cached_features, save_reference_stats

    source, batches = _reference_batches(o)
    cache = FeatureCache(o.cache_dir, {"images": source, "batch_size": o.batch_size}) if o.cache_dir else None
    net = InceptionFeatures().to(o.device)
    feats = torch.cat([cached_features(cache, i * o.batch_size, len(batch), lambda: net(batch.to(o.device)).cpu())
                       for i, batch in enumerate(tqdm(batches, desc="reference features", unit="batch"))])
    save_reference_stats(o.out, feats)
    print(f"wrote {o.out}: mu/sigma of {feats.shape[0]} images ({source})")


@options
class AssembleOptions:
    rdm: str = option(help="rcg-rdm repo folder (its EMA weights are used)")
    mage: str = option(help="rcg-mage repo folder (brings the encoder and tokenizer)")
    out: str = option(help="output repo folder")
    sampling: str | None = option(None, 'JSON of sampling defaults, e.g. \'{"cfg": 2.0, "temperature": 4.5}\'')


def cmd_assemble(o: AssembleOptions) -> None:
    import zoo
    from zoo.rcg.module import MAGEModule, RDMModule
    from zoo.rcg.pipeline import RCGPipeline

    rdm, mage = zoo.load(o.rdm), zoo.load(o.mage)
    for model, kind, flag in ((rdm, RDMModule, "--rdm"), (mage, MAGEModule, "--mage")):
        if not isinstance(model, kind):
            raise SystemExit(f"{flag} must be a trained {kind.model_type} repo, got a {model.model_type}")
    pipeline = RCGPipeline.from_stages(rdm, mage, sampling=json.loads(o.sampling) if o.sampling else None)
    names = pipeline.save_pretrained(o.out)
    print(f"wrote {o.out} ({', '.join(names)}): RCG pipeline of {o.rdm} (EMA) + {o.mage}; "
          f"sample with `zoo rcg sample {o.out}`")


@options
class ConvertOptions:
    src: list[str] = arg("one checkpoint (-> its stage), or a MAGE + an RDM checkpoint (-> pipeline)")
    out: str = option(help="output repo folder")
    config: str | None = option(None, "JSON (or JSON file) of config overrides, e.g. '{\"encoder\": {\"num_heads\": "
                                "2}}'")


def cmd_convert(o: ConvertOptions) -> None:
    from zoo.rcg.convert import convert_files

    config = None
    if o.config:
        text = Path(o.config).read_text() if Path(o.config).is_file() else o.config
        try:
            config = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"--config must be JSON or a JSON file: {err}") from None
    module = convert_files(o.src, o.out, config)
    print(f"wrote {o.out}: {type(module).__name__} ({module.model_type}); load it with zoo.load({str(o.out)!r})")


def register_cli(parent, convert) -> None:
    sub = commands(parent, "rcg", "RCG: sample, reconstruct, evaluate FID")
    command(sub, "sample", cmd_sample, "sample images into a PNG grid")
    command(sub, "reconstruct", cmd_reconstruct, "generate from the representations of given images")
    command(sub, "eval", cmd_eval, "FID of samples against reference statistics or a folder of images")
    command(sub, "tokenizer-fid", cmd_tokenizer_fid, "FID of the tokenizer's reconstructions of real images (a "
            "generator's floor)")
    command(sub, "ref-stats", cmd_ref_stats, "FID reference statistics (mu/sigma .npz) of a folder of images")
    command(sub, "assemble", cmd_assemble, "join trained stages (an RDM and a conditioned MAGE repo) into a pipeline")
    command(convert, "rcg", cmd_convert, "official MoCo v3 / MAGE / RDM / VQGAN checkpoints -> zoo repos")
