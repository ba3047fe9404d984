"""RCG sampling throughput on CPU with a tiny configuration, split between RDM, MAGE and VQGAN decode.

    .venv/bin/python benchmarks/bench_rcg.py [--n 16] [--threads 1]

The baseline row is sampling without guidance at batch 1; the others report their throughput as a ratio of it
(measured in the same process). The tiny model has random weights: only the speed is meaningful.
"""

from __future__ import annotations

import argparse
import time

import torch

from zoo.rcg.pipeline import RCGPipeline

TINY = dict(
    encoder=dict(img_size=64, patch_size=16, embed_dim=64, depth=2, num_heads=2, proj_hidden_dim=128, rep_dim=32),
    rdm=dict(in_channels=32, time_embed_dim=64, model_channels=256, bottleneck_channels=256, num_res_blocks=4),
    mage=dict(codebook_size=64, num_tokens=64, embed_dim=64, depth=2, num_heads=2, decoder_embed_dim=64,
              decoder_depth=2, decoder_num_heads=2, rep_dim=32),
    vqgan=dict(ch=32, ch_mult=[1, 2, 2], num_res_blocks=1, z_channels=16, n_embed=64),
    image_size=32,
)


def run(model: RCGPipeline, n: int, batch_size: int, cfg: float, rdm_steps: int, steps: int) -> dict[str, float]:
    model.sample(batch_size, cfg=cfg, rdm_steps=rdm_steps, steps=steps, seed=0)  # warm-up
    timings: dict[str, float] = {}
    start = time.perf_counter()
    model.sample(n, cfg=cfg, rdm_steps=rdm_steps, steps=steps, seed=1, batch_size=batch_size, timings=timings)
    total = time.perf_counter() - start
    return {"images_per_s": n / total, **{k: v / total for k, v in timings.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rdm-steps", type=int, default=50)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = RCGPipeline(**TINY).eval()
    settings = [("no CFG, batch 1 (baseline)", 1, 0.0), ("no CFG, batch 8", 8, 0.0), ("CFG 1.0, batch 1", 1, 1.0),
                ("CFG 1.0, batch 8", 8, 1.0)]
    rows = [(name, run(model, args.n, bs, cfg, args.rdm_steps, args.steps)) for name, bs, cfg in settings]
    base = rows[0][1]["images_per_s"]
    print(f"RCG sampling, tiny config ({TINY['image_size']}px, {TINY['mage']['num_tokens']} tokens), CPU, "
          f"{args.threads} thread(s), n={args.n}, RDM {args.rdm_steps} DDIM steps, MAGE {args.steps} iterations")
    header = f"{'setting':<28} {'images/s':>9} {'vs base':>8} {'RDM':>6} {'MAGE':>6} {'VQGAN':>6}"
    print(header)
    print("-" * len(header))
    for name, r in rows:
        print(f"{name:<28} {r['images_per_s']:>9.2f} {r['images_per_s'] / base:>7.2f}x {r['rdm']:>6.1%} "
              f"{r['mage']:>6.1%} {r['vqgan']:>6.1%}")


if __name__ == "__main__":
    main()
