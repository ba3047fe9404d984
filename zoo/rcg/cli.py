"""``zoo rcg sample | reconstruct | eval | tokenizer-fid | ref-stats | assemble`` and ``zoo convert rcg``."""

from __future__ import annotations

import json
from pathlib import Path

from zoo._cli import add_model_argument, load_model, print_json

_PIPELINE = "catalog name (e.g. rcg-imagenet256) or a local rcg-pipeline repo folder"
_DTYPE = "float32 (default), bfloat16 or float16"


def _load(args):
    model = load_model(args)
    if not hasattr(model, "sample"):
        raise ValueError(f"{args.name} is a {type(model).__name__}; `zoo rcg` needs an RCG pipeline (rcg-pipeline)")
    return model


def _sampling_kwargs(args) -> dict:
    keys = ("cfg", "rdm_steps", "steps", "temperature", "eta")
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


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


def cmd_sample(args) -> None:
    model = _load(args)
    images = model.sample(args.n, seed=args.seed, batch_size=args.batch_size, progress=True,
                          labels=_labels(args.labels, args.n), **_sampling_kwargs(args))
    save_grid(images, args.out, args.nrow)
    print(f"wrote {args.out}: {args.n} samples of {args.name} ({images.shape[-1]}x{images.shape[-2]})")


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


def cmd_reconstruct(args) -> None:
    import numpy as np
    import torch

    pictures = read_images(args.images)  # before the model loads: a wrong file fails at once
    model = _load(args)
    size = model.image_size  # a property, so that a BitDelta of the pipeline has it too
    images = [torch.from_numpy(np.array(fit_size(path, img, size, args.center_crop))).permute(2, 0, 1).float() / 255
              for path, img in zip(args.images, pictures)]
    batch = torch.stack(images)
    out = model.reconstruct(batch, seed=args.seed, **_sampling_kwargs(args))
    save_grid(torch.cat([batch, out.cpu()]), args.out, nrow=len(images))
    print(f"wrote {args.out}: inputs (top row) and generations from their representations (bottom row)")


def cmd_eval(args) -> None:
    from zoo.rcg.eval import evaluate_fid

    model = _load(args)
    result = evaluate_fid(model, n=args.n, batch_size=args.batch_size, seed=args.seed, ref_stats=args.ref_stats,
                          ref_images=args.ref_images, save_ref_stats=args.save_ref_stats,
                          inception_score=args.inception_score, cache_dir=args.cache_dir, **_sampling_kwargs(args))
    result["model"] = args.name
    print_json(result, args.out)


def _require_one_image_source(args) -> None:
    if (args.folder is None) == (args.fashion_mnist is None):
        raise SystemExit("give a folder of images or --fashion-mnist train|test (not both)")


def _fashion_mnist(args):
    """The --fashion-mnist split as uint8 RGB images (N, 3, 28, 28), the grey channel repeated."""
    import torch

    from zoo.rcg.data import FashionMNIST

    return torch.from_numpy(FashionMNIST(args.root, args.fashion_mnist).images)[:, None].expand(-1, 3, -1, -1)


def cmd_tokenizer_fid(args) -> None:
    import numpy as np
    import torch

    from zoo.rcg.eval import evaluate_tokenizer_fid, iter_image_folder

    _require_one_image_source(args)
    model = load_model(args)
    tokenizer = getattr(model, "vqgan", None)
    if tokenizer is None:
        raise SystemExit(f"{args.name} is a {type(model).__name__} without a tokenizer; give an RCG VQGAN, MAGE or "
                         "pipeline repo")
    if args.fashion_mnist is not None:
        pool = _fashion_mnist(args)
        if not 0 < args.n <= len(pool):
            raise SystemExit(f"--n must lie in 1..{len(pool)} for Fashion-MNIST {args.fashion_mnist}")
        images = pool[np.random.default_rng(args.seed).choice(len(pool), args.n, replace=False)]
        source = f"fashion-mnist:{args.fashion_mnist}, {args.n} images drawn with seed {args.seed}"
    else:
        images = torch.cat(list(iter_image_folder(args.folder, limit=args.n)))
        source = f"{args.folder}, the first {images.shape[0]} images"
    result = evaluate_tokenizer_fid(tokenizer, images, ref_stats=args.ref_stats, batch_size=args.batch_size)
    result.update(model=args.name, images=source)
    print_json(result, args.out)


def _reference_batches(args):
    """(name, uint8 batches) of the images ref-stats reads: a folder, or a Fashion-MNIST split."""
    from zoo.rcg.eval import iter_image_folder

    if args.fashion_mnist is None:
        return str(args.folder), iter_image_folder(args.folder, args.batch_size)
    images = _fashion_mnist(args)
    return f"fashion-mnist:{args.fashion_mnist}", (images[i:i + args.batch_size]
                                                    for i in range(0, len(images), args.batch_size))


def cmd_ref_stats(args) -> None:
    import torch
    from tqdm.auto import tqdm

    from zoo.rcg.eval import FeatureCache, InceptionFeatures, cached_features, save_reference_stats

    _require_one_image_source(args)
    source, batches = _reference_batches(args)
    cache = FeatureCache(args.cache_dir, {"images": source, "batch_size": args.batch_size}) if args.cache_dir else None
    net = InceptionFeatures().to(args.device)
    feats = torch.cat([cached_features(cache, i * args.batch_size, len(batch), lambda: net(batch.to(args.device)).cpu())
                       for i, batch in enumerate(tqdm(batches, desc="reference features", unit="batch"))])
    save_reference_stats(args.out, feats)
    print(f"wrote {args.out}: mu/sigma of {feats.shape[0]} images ({source})")


def cmd_assemble(args) -> None:
    import zoo
    from zoo.rcg.module import MAGEModule, RDMModule
    from zoo.rcg.pipeline import RCGPipeline

    rdm, mage = zoo.load(args.rdm), zoo.load(args.mage)
    for model, kind, flag in ((rdm, RDMModule, "--rdm"), (mage, MAGEModule, "--mage")):
        if not isinstance(model, kind):
            raise SystemExit(f"{flag} must be a trained {kind.model_type} repo, got a {model.model_type}")
    sampling = json.loads(args.sampling) if args.sampling else None
    pipeline = RCGPipeline.from_stages(rdm, mage, sampling=sampling)
    names = pipeline.save_pretrained(args.out)
    print(f"wrote {args.out} ({', '.join(names)}): RCG pipeline of {args.rdm} (EMA) + {args.mage}; "
          f"sample with `zoo rcg sample {args.out}`")


def cmd_convert(args) -> None:
    from zoo.rcg.convert import convert_files

    config = None
    if args.config:
        text = Path(args.config).read_text() if Path(args.config).is_file() else args.config
        try:
            config = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"--config must be JSON or a JSON file: {err}") from None
    module = convert_files(args.src, args.out, config)
    print(f"wrote {args.out}: {type(module).__name__} ({module.model_type}); load it with zoo.load({str(args.out)!r})")


def _add_sampling(p) -> None:
    p.add_argument("--cfg", type=float, help="classifier-free guidance scale (linearly ramped); default: the model's")
    p.add_argument("--rdm-steps", type=int, help="DDIM steps of the representation diffusion model")
    p.add_argument("--eta", type=float, help="DDIM eta (1.0 in the paper)")
    p.add_argument("--steps", type=int, help="MAGE decoding iterations")
    p.add_argument("--temperature", type=float, help="MAGE choice temperature")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sampling")


def register_cli(commands, convert) -> None:
    rcg = commands.add_parser("rcg", help="RCG: sample, reconstruct, evaluate FID")
    sub = rcg.add_subparsers(dest="rcg_command", metavar="COMMAND", required=True)

    p = sub.add_parser("sample", help="sample images into a PNG grid")
    add_model_argument(p, _PIPELINE, dtype=_DTYPE)
    p.add_argument("--n", type=int, default=16, help="images to sample")
    p.add_argument("--out", default="grid.png", help="PNG grid to write")
    p.add_argument("--batch-size", type=int, help="images per forward pass (default: all --n at once)")
    p.add_argument("--nrow", type=int, help="images per grid row (default: a square grid)")
    p.add_argument("--labels", help="class-conditional models: one class id, or one per image (comma-separated)")
    _add_sampling(p)
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("reconstruct", help="generate from the representations of given images")
    add_model_argument(p, _PIPELINE, dtype=_DTYPE)
    p.add_argument("images", nargs="+", help="image files (the model's resolution)")
    p.add_argument("--out", default="reconstruct.png", help="PNG grid to write: the inputs, then their generations")
    p.add_argument("--center-crop", action="store_true",
                   help="cut out the centre square of an image of another size and resize it to the model's size "
                        "(without it, such an image is an error, as in RCGPipeline.reconstruct)")
    _add_sampling(p)
    p.set_defaults(func=cmd_reconstruct)

    p = sub.add_parser("eval", help="FID of samples against reference statistics or a folder of images")
    add_model_argument(p, _PIPELINE, dtype=_DTYPE)
    p.add_argument("--n", type=int, default=50000, help="samples to generate")
    p.add_argument("--batch-size", type=int, default=50, help="images per forward pass")
    ref = p.add_mutually_exclusive_group(required=True)
    ref.add_argument("--ref-stats", help="mu/sigma .npz (e.g. ADM's ImageNet 256 reference statistics)")
    ref.add_argument("--ref-images", help="folder of real images")
    p.add_argument("--save-ref-stats", help="with --ref-images: also write their mu/sigma .npz")
    p.add_argument("--inception-score", action="store_true", help="also compute IS (needs classifier weights)")
    p.add_argument("--out", help="write the metrics as JSON")
    p.add_argument("--cache-dir", help="keep per-batch sample features here; a rerun resumes from them")
    _add_sampling(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("tokenizer-fid", help="FID of the tokenizer's reconstructions of real images (a generator's floor)")
    add_model_argument(p, "an RCG VQGAN, MAGE or pipeline repo folder or catalog name", dtype=_DTYPE)
    p.add_argument("folder", nargs="?", help="folder of real images (the first --n are used)")
    p.add_argument("--fashion-mnist", choices=("train", "test"), help="use --n random images of this split instead")
    p.add_argument("--root", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST idx folder")
    p.add_argument("--n", type=int, default=2000, help="real images to reconstruct")
    p.add_argument("--seed", type=int, default=0, help="which Fashion-MNIST images (numpy default_rng(seed).choice)")
    p.add_argument("--ref-stats", required=True, help="mu/sigma .npz of the reference images (zoo rcg ref-stats)")
    p.add_argument("--batch-size", type=int, default=50, help="images per forward pass")
    p.add_argument("--out", help="write the metrics as JSON")
    p.set_defaults(func=cmd_tokenizer_fid)

    p = sub.add_parser("ref-stats", help="FID reference statistics (mu/sigma .npz) of a folder of images")
    p.add_argument("folder", nargs="?", help="folder of real images")
    p.add_argument("--fashion-mnist", choices=("train", "test"), help="use this Fashion-MNIST split instead")
    p.add_argument("--root", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST idx folder")
    p.add_argument("--out", required=True, help="the .npz to write")
    p.add_argument("--batch-size", type=int, default=100, help="images per forward pass")
    p.add_argument("--cache-dir", help="keep per-batch features here; a rerun resumes from them")
    p.add_argument("--device", default="cpu", help="torch device")
    p.set_defaults(func=cmd_ref_stats)

    p = sub.add_parser("assemble", help="join trained stages (an RDM and a conditioned MAGE repo) into a pipeline")
    p.add_argument("--rdm", required=True, help="rcg-rdm repo folder (its EMA weights are used)")
    p.add_argument("--mage", required=True, help="rcg-mage repo folder (brings the encoder and tokenizer)")
    p.add_argument("--out", required=True, help="output repo folder")
    p.add_argument("--sampling", help='JSON of sampling defaults, e.g. \'{"cfg": 2.0, "temperature": 4.5}\'')
    p.set_defaults(func=cmd_assemble)

    p = convert.add_parser("rcg", help="official MoCo v3 / MAGE / RDM / VQGAN checkpoints -> zoo repos")
    p.add_argument("src", nargs="+", help="one checkpoint (-> its stage), or a MAGE + an RDM checkpoint (-> pipeline)")
    p.add_argument("--out", required=True, help="output repo folder")
    p.add_argument("--config", help="JSON (or JSON file) of config overrides, e.g. '{\"encoder\": {\"num_heads\": 2}}'")
    p.set_defaults(func=cmd_convert)
