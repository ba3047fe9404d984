"""Official searchless_chess checkpoints -> zoo repo folders.

Two sources hold the same Haiku parameter tree ``{module: {param: array}}``:
  * a flat ``.npz`` keyed ``module/param`` (e.g. ``linear_24/w``);
  * an Orbax PyTree checkpoint ``<dir>/<step>/params/`` (zarr arrays in an OCDBT store; older Orbax: per-array folders).
Haiku linears store ``w`` as ``[in, out]``; PyTorch wants ``[out, in]``, so every ``w`` is transposed.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from zoo.io import LazyTensor, write_repo
from zoo.chess.bag import check_policy
from zoo.chess.model import ChessTransformerConfig
from zoo.chess.tokenizer import NUM_ACTIONS
from zoo.convert import map_keys, single_file

__all__ = ["read_npz", "read_orbax", "find_params_dir", "infer_config", "haiku_to_state_dict",
           "haiku_to_lazy_state_dict", "open_params", "convert", "catalog_convert_args", "from_upstream"]


# ----------------------------------------------------------------------------- readers
def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {key: np.asarray(data[key]) for key in data.files}


def find_params_dir(root: str | os.PathLike, step: int | None = None, ema: bool = False) -> Path:
    """``<step>/params`` (``params_ema`` with ``ema``) for ``step`` or the largest step anywhere under ``root`` (e.g. an
    unpacked official zip); ``root`` may also be a step folder or the params folder itself."""
    root = Path(root)
    leaf = "params_ema" if ema else "params"
    if (root / "_METADATA").exists() or (root / "manifest.ocdbt").exists():
        return root
    if (root / leaf).is_dir():
        return root / leaf
    step_dirs = [p for p in root.rglob("*") if p.is_dir() and p.name.isdigit() and (p / leaf).is_dir()]
    if not step_dirs:
        raise FileNotFoundError(f"no Orbax checkpoint (<step>/{leaf}/) under {root}")
    steps = {int(p.name): p for p in reversed(step_dirs)}  # the first folder of each step
    step = max(steps) if step is None else step
    if step not in steps:
        raise FileNotFoundError(f"step {step} not under {root}; available: {sorted(steps)}")
    return steps[step] / leaf


class OrbaxArray:
    """One array of an Orbax checkpoint, opened (shape and dtype known) but read only by ``np.asarray``."""

    def __init__(self, store):
        self._store = store
        self.shape = tuple(int(d) for d in store.shape)
        self.dtype = np.dtype(store.dtype.numpy_dtype)

    def __array__(self, dtype=None, copy=None):
        array = np.asarray(self._store.read().result())
        return array if dtype is None else array.astype(dtype)


def read_orbax(params_dir: str | os.PathLike, lazy: bool = False) -> dict[str, np.ndarray]:
    """All arrays of an Orbax ``params`` folder, keyed ``module/param``, read with TensorStore; ``lazy=True`` returns
    :class:`OrbaxArray` handles, so that a converter holds one array at a time instead of the whole checkpoint."""
    try:
        import tensorstore as ts
    except ImportError:
        raise ImportError("reading Orbax checkpoints needs the optional 'tensorstore' package: pip install tensorstore "
                          "(or convert from a flat params .npz instead)") from None
    params_dir = Path(params_dir).resolve()
    if (params_dir / "manifest.ocdbt").exists():
        kvstore = {"driver": "ocdbt", "base": f"file://{params_dir}"}
        keys = [k.decode() for k in ts.KvStore.open(kvstore).result().list().result()]
        names = sorted(k[: -len("/.zarray")] for k in keys if k.endswith("/.zarray"))
    else:  # older Orbax: one zarr folder per array
        kvstore = {"driver": "file", "path": f"{params_dir}/"}
        names = sorted(p.parent.name for p in params_dir.glob("*/.zarray"))
    if not names:
        raise FileNotFoundError(f"{params_dir} holds no zarr arrays; is it an Orbax params folder?")
    out = {}
    for name in names:
        module, _, param = name.rpartition(".")
        array = OrbaxArray(ts.open({"driver": "zarr", "kvstore": kvstore, "path": name + "/"}, open=True).result())
        out[f"{module}/{param}"] = array if lazy else np.asarray(array)
    return out


def read_params(src: str | os.PathLike, step: int | None = None, ema: bool = False) -> dict[str, np.ndarray]:
    """A Haiku tree from a ``.npz`` file, an Orbax checkpoint folder, or an official ``.zip``."""
    with open_params(src, step=step, ema=ema) as params:
        return {key: np.asarray(value) for key, value in params.items()}


@contextmanager
def open_params(src: str | os.PathLike, step: int | None = None, ema: bool = False) -> Iterator[dict]:
    """The Haiku tree of ``src`` while the block runs; Orbax arrays (a folder or an official ``.zip``, unpacked
    to a temporary folder on disk) are lazy :class:`OrbaxArray` handles, read one at a time."""
    src = Path(src)
    if src.suffix == ".npz":
        yield read_npz(src)
    elif src.suffix == ".zip":
        with tempfile.TemporaryDirectory() as tmp:
            with zipfile.ZipFile(src) as archive:
                archive.extractall(tmp)
            yield read_orbax(find_params_dir(tmp, step, ema), lazy=True)
    elif src.is_dir():
        yield read_orbax(find_params_dir(src, step, ema), lazy=True)
    else:
        raise ValueError(f"{src}: expected a params .npz, an Orbax checkpoint folder or an official checkpoint .zip")


# ----------------------------------------------------------------------------- mapping
def _name(base: str, i: int) -> str:
    return base if i == 0 else f"{base}_{i}"


def infer_config(params: dict[str, np.ndarray], *, policy: str | None = None, num_heads: int | None = None) -> ChessTransformerConfig:
    """Architecture from the tree's shapes, plus what they cannot tell: the head count (attention weights are D×D for
    any split) and, unless the head is the 1968-way BC head, whether a value head is action- or state-value."""
    if "embed/embeddings" not in params:
        raise ValueError("not a searchless_chess parameter tree: 'embed/embeddings' is missing")
    vocab, dim = params["embed/embeddings"].shape
    num_layers = len({m.group(0) for k in params if (m := re.match(r"multi_head_dot_product_attention(_\d+)?(?=/)", k))})
    head_w = params.get(f"{_name('linear', 3 * num_layers)}/w")
    if head_w is None:
        raise ValueError(f"the head {_name('linear', 3 * num_layers)}/w is missing for {num_layers} layers")
    out = head_w.shape[1]
    hidden = params["linear/w"].shape[1]
    if policy is not None:
        check_policy(policy)
    if policy is None and out == NUM_ACTIONS:
        policy = "behavioral_cloning"
    if policy is not None and (policy == "behavioral_cloning") != (out == NUM_ACTIONS):
        raise ValueError(f"a head with {out} outputs does not fit policy {policy!r}")
    missing = []
    if num_heads is None:
        missing.append(f"--num-heads (num_heads=): the head count is not stored in the checkpoint and any divisor "
                       f"of the width {dim} fits its weights; the official 9M, 136M and 270M checkpoints (AV, and 9M "
                       "SV/BC) use 8, the example train.py model 4")
    if policy is None:
        missing.append(f"--policy (policy=) action_value or state_value: both train the same {out}-way value head, so "
                       "the weights do not tell them apart (the official 9M_state_value.zip is state_value, "
                       "9M/136M/270M.zip are action_value)")
    if missing:
        raise ValueError("this searchless_chess checkpoint cannot be converted without " + "; and ".join(missing))
    if num_heads < 1 or dim % num_heads:
        raise ValueError(f"num_heads={num_heads} does not divide the width {dim}")
    return ChessTransformerConfig(policy=policy, num_layers=num_layers, embedding_dim=dim, num_heads=num_heads,
                                  widening_factor=hidden // dim, num_return_buckets=out if out != NUM_ACTIONS else 128,
                                  vocab_size=vocab, max_sequence_length=params["embed_1/embeddings"].shape[0])


def haiku_mapping(num_layers: int) -> dict[str, tuple[str, bool]]:
    """``ChessTransformer`` parameter name -> (Haiku key, transposed?) for a ``num_layers`` tree."""
    m = {"token_embedding.weight": ("embed/embeddings", False), "position_embedding": ("embed_1/embeddings", False)}
    for i in range(num_layers):
        attn = _name("multi_head_dot_product_attention", i)
        for j, proj in enumerate("qkvo"):
            m[f"blocks.{i}.attn.{proj}.weight"] = (f"{attn}/{_name('linear', j)}/w", True)
        for ln, idx in (("ln_attn", 2 * i), ("ln_mlp", 2 * i + 1)):
            m[f"blocks.{i}.{ln}.weight"] = (f"{_name('layer_norm', idx)}/scale", False)
            m[f"blocks.{i}.{ln}.bias"] = (f"{_name('layer_norm', idx)}/offset", False)
        for j, proj in enumerate(("gate", "up", "down")):
            m[f"blocks.{i}.mlp.{proj}.weight"] = (f"{_name('linear', 3 * i + j)}/w", True)
    m["ln_final.weight"] = (f"{_name('layer_norm', 2 * num_layers)}/scale", False)
    m["ln_final.bias"] = (f"{_name('layer_norm', 2 * num_layers)}/offset", False)
    m["head.weight"] = (f"{_name('linear', 3 * num_layers)}/w", True)
    m["head.bias"] = (f"{_name('linear', 3 * num_layers)}/b", False)
    return m


def _to_torch(array, transpose: bool) -> torch.Tensor:
    array = np.asarray(array)
    return torch.from_numpy(np.ascontiguousarray(array.T if transpose else array, dtype=np.float32))


def haiku_to_lazy_state_dict(params: dict, num_layers: int, prefix: str = "") -> dict[str, LazyTensor]:
    """The Haiku tree on ``ChessTransformer`` parameter names as :class:`zoo.io.LazyTensor` s, each array read (and
    transposed) only when ``save_state_dict`` streams it."""
    mapping = haiku_mapping(num_layers)
    arrays = map_keys(params, [(key, name) for name, (key, _) in mapping.items()], expected=mapping,
                      what=f"the tree (read as a {num_layers}-layer model)")
    out = {}
    for name, (_, transpose) in mapping.items():
        array, shape = arrays[name], tuple(arrays[name].shape)
        out[prefix + name] = LazyTensor(torch.float32, shape[::-1] if transpose else shape,
                                        lambda array=array, transpose=transpose: _to_torch(array, transpose))
    return out


def haiku_to_state_dict(params: dict[str, np.ndarray], num_layers: int) -> dict[str, torch.Tensor]:
    """Map the Haiku tree onto ``ChessTransformer`` parameter names (linear weights transposed)."""
    return {name: lazy.load() for name, lazy in haiku_to_lazy_state_dict(params, num_layers).items()}


# ----------------------------------------------------------------------------- entry points
def convert(src: str | os.PathLike, out_dir: str | os.PathLike, *, policy: str | None = None,
            num_heads: int | None = None, step: int | None = None, ema: bool = False):
    """Convert an official checkpoint (npz / Orbax folder / zip) into a zoo repo folder; returns the module. For
    ``num_heads`` and ``policy`` see :func:`infer_config`."""
    from zoo.chess.module import ChessTransformerModule

    with open_params(src, step=step, ema=ema) as params:
        cfg = infer_config(params, policy=policy, num_heads=num_heads)
        module = ChessTransformerModule.build_on_meta({k: v for k, v in vars(cfg).items() if k != "vocab_size"})
        # streamed: every array is read, transposed and written in turn (peak memory ~ one array, not the model)
        state = haiku_to_lazy_state_dict(params, cfg.num_layers, prefix="model.")
        expected = module.pretrained_state_dict()
        wrong = sorted(k for k in set(state) | set(expected)
                       if k not in state or k not in expected or tuple(expected[k].shape) != state[k].shape)
        if wrong:
            raise ValueError(f"the checkpoint's arrays do not fit {type(module).__name__}: {wrong[:8]}")
        write_repo(out_dir, state, module.config_json())
    return ChessTransformerModule.from_pretrained(out_dir)  # the written repo, read back strictly (weights memory-mapped)


def catalog_convert_args(entry) -> dict:
    """``entry.convert_args``: ``num_heads``, ``policy`` (not in checkpoints), optionally ``step``, ``num_params``."""
    args = dict(entry.convert_args or {})
    missing = [key for key in ("num_heads", "policy") if key not in args]
    if missing:
        raise ValueError(f"catalog entry {entry.name!r}: convert_args lacks {missing}, which the official checkpoint "
                         "does not store")
    return args


def from_upstream(files: dict[str, Path], out_dir: Path, entry) -> None:
    """Catalog converter: the official ``<name>.zip`` -> zoo repo folder (``params`` at the entry's step)."""
    arch = catalog_convert_args(entry)
    module = convert(single_file(files, entry, "checkpoint zip"), out_dir, policy=arch["policy"], num_heads=arch["num_heads"], step=arch.get("step"))
    expected = arch.get("num_params")
    if expected is not None and module.model.num_params() != expected:
        raise ValueError(f"{entry.name}: converted {module.model.num_params()} parameters, expected {expected}")
    (Path(out_dir) / "upstream.json").write_text(json.dumps({"name": entry.name, "files": [f.url for f in entry.upstream]}) + "\n")
