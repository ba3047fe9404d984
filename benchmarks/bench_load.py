"""Warm-cache ``zoo.load`` against a bare ``safetensors.torch.load_file`` of the same weights.

A ~100M-parameter catalog model is published to a temporary embedded hub, loaded once (hashing the files and
remembering the check), then both loaders are timed alternately. Both return tensors backed by the memory-mapped
file, so each is timed twice: the call alone, and the call plus one read of every weight (what the first forward
pays). Target: zoo.load / load_file <= 1.2.

    python benchmarks/bench_load.py [--params 100e6] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

import zoo
from zoo._verify import file_pin
from zoo.module import ZooModule
from zoo.registry import FileSpec, ModelEntry, register_method, register_model


class WideMLP(ZooModule):
    """Plain stack of square Linear layers: all time goes to reading weights, as in real checkpoints."""

    model_type = "bench-wide-mlp"
    method = "bench"

    def __init__(self, width: int = 4096, depth: int = 6):
        super().__init__()
        self.save_hyperparameters()
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=float, default=100e6)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    width = 4096
    depth = max(1, round(args.params / (width * width + width)))
    register_method("bench", modules={"bench-wide-mlp": f"{__name__}:WideMLP"})
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ZOO_HOME"] = str(Path(tmp) / "home")
        os.environ["ZOO_HUB"] = str(Path(tmp) / "hub")
        repo = Path(tmp) / "hub" / "bench-100m"
        model = WideMLP(width, depth)
        n_params = sum(p.numel() for p in model.parameters())
        names = model.save_pretrained(repo)
        del model
        register_model(ModelEntry(
            name="bench-100m", method="bench",
            files=tuple(FileSpec(n, **file_pin(repo / n)) for n in names),
        ))
        weights = str(repo / "model.safetensors")
        zoo.load("bench-100m")  # first load hashes the files; later loads are warm
        load_file(weights)

        @torch.no_grad()
        def touch(tensors) -> float:
            return float(sum(t.float().sum() for t in tensors))

        times: dict[str, list[float]] = {k: [] for k in ("st", "zoo", "st+read", "zoo+read")}
        for _ in range(args.repeats):
            t = time.perf_counter()
            sd = load_file(weights)
            times["st"].append(time.perf_counter() - t)
            touch(sd.values())
            times["st+read"].append(time.perf_counter() - t)
            del sd
            t = time.perf_counter()
            m = zoo.load("bench-100m")
            times["zoo"].append(time.perf_counter() - t)
            touch(m.parameters())
            times["zoo+read"].append(time.perf_counter() - t)
            del m
        med = {k: statistics.median(v) for k, v in times.items()}
        size = os.path.getsize(weights) / 1024**2
        print(f"model: {n_params / 1e6:.1f}M parameters, {size:.0f} MiB safetensors, "
              f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeats}")
        print(f"{'what':44s} {'seconds':>8s} {'ratio':>6s}")
        rows = [("safetensors.torch.load_file", "st", "st"), ("zoo.load (warm cache)", "zoo", "st"),
                ("load_file + read every weight", "st+read", "st+read"),
                ("zoo.load (warm cache) + read every weight", "zoo+read", "st+read")]
        for label, key, base in rows:
            print(f"{label:44s} {med[key]:8.4f} {med[key] / med[base]:6.2f}")
        overhead = med["zoo"] - med["st"]
        ratio = med["zoo+read"] / med["st+read"]
        print(f"fixed zoo.load overhead (module build, config, pin check): {overhead * 1e3:.1f} ms")
        print(f"target zoo.load / load_file <= 1.20 with weights read: {ratio:.2f} ({'met' if ratio <= 1.2 else 'NOT met'})")

if __name__ == "__main__":
    sys.exit(main())
