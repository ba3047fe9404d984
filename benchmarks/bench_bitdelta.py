"""BitDelta multi-tenant serving vs N merged fine-tune copies: memory and forward latency, in one process.

For N = 1, 4, 16 fine-tunes of one Llama-style base (random weights; each fine-tune perturbs every attention/MLP
projection and the norms, so a delta carries signs + scales + norms), it measures

* memory: bytes of every distinct parameter/buffer held: one base + N packed deltas (unmerged, multi-tenant)
  vs N plain fine-tuned models (merged W_base + α·S, no bits kept);
* latency: one forward of an N-row batch (row i -> tenant i) through the multi-tenant model, vs running each
  of the N merged models on its own row, for each sequence length (1 ~ a decode step without cache, 64 ~ prefill).

    python benchmarks/bench_bitdelta.py                    # CPU, small model
    python benchmarks/bench_bitdelta.py --device cuda --hidden 2048 --layers 8 --dtype bfloat16
Ratios are merged / unmerged: > 1 means multi-tenant BitDelta is smaller or faster.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from zoo.bitdelta.delta import compress
from zoo.bitdelta.model import apply_deltas_, unwrap_merged_
from zoo.bitdelta.serve import MultiTenantLM


def tensor_bytes(*modules: torch.nn.Module) -> int:
    """Bytes of the distinct storages behind all parameters and buffers (shared tensors counted once)."""
    seen, total = set(), 0
    for module in modules:
        for t in [*module.parameters(), *module.buffers()]:
            key = (t.untyped_storage().data_ptr(), t.device)
            if key not in seen:
                seen.add(key)
                total += t.untyped_storage().nbytes()
    return total


def timed(fn, device: torch.device, repeats: int) -> float:
    """Median wall time of ``fn()`` in milliseconds, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def build_base(args, dtype: torch.dtype, device: torch.device):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.heads, max_position_embeddings=max(args.seq), tie_word_embeddings=False)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


@torch.no_grad()
def make_deltas(base, n: int):
    deltas = []
    for t in range(n):
        finetune = copy.deepcopy(base)
        g = torch.Generator(device="cpu").manual_seed(1000 + t)
        for name, p in finetune.named_parameters():
            if "proj" in name or "norm" in name:
                p.add_((0.002 * torch.randn(p.shape, generator=g)).to(p))
        deltas.append(compress(base, finetune, progress=False))
        del finetune
    return deltas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--seq", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--intermediate", type=int, default=768)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (the machine is shared)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)

    base = build_base(args, dtype, device)
    deltas = make_deltas(base, max(args.tenants))
    base_params = sum(p.numel() for p in base.parameters())
    print(f"base: Llama {args.layers} layers, hidden {args.hidden}, {base_params / 1e6:.1f}M params, {args.dtype}, "
          f"{args.device}; one delta = {deltas[0].nbytes() / 2**20:.2f} MiB "
          f"({len(deltas[0].shapes)} packed layers + {len(deltas[0].params)} carried tensors)")

    rows = []
    for n in args.tenants:
        server = MultiTenantLM(copy.deepcopy(base), deltas[:n])
        merged = [unwrap_merged_(apply_deltas_(copy.deepcopy(base), [d], merged=True)) for d in deltas[:n]]
        mem_unmerged, mem_merged = tensor_bytes(server), tensor_bytes(*merged)
        for seq in args.seq:
            ids = torch.randint(0, args.vocab, (n, seq), generator=torch.Generator().manual_seed(seq)).to(device)
            tenants = torch.arange(n)
            with torch.inference_mode():
                t_unmerged = timed(lambda: server(input_ids=ids, tenants=tenants), device, args.repeats)
                t_merged = timed(lambda: [m(input_ids=ids[i : i + 1]) for i, m in enumerate(merged)], device, args.repeats)
            rows.append((n, seq, mem_unmerged, mem_merged, t_unmerged, t_merged))

    header = ("N", "seq", "multi-tenant MiB", "N merged MiB", "memory ratio", "multi-tenant ms", "N merged ms", "latency ratio")
    print("  ".join(f"{h:>16s}" if i > 1 else f"{h:>4s}" for i, h in enumerate(header)))
    for n, seq, mu, mm, tu, tm in rows:
        cells = [f"{n:>4d}", f"{seq:>4d}", f"{mu / 2**20:16.2f}", f"{mm / 2**20:16.2f}", f"{mm / mu:16.2f}",
                 f"{tu:16.2f}", f"{tm:16.2f}", f"{tm / tu:16.2f}"]
        print("  ".join(cells))
    print("ratios: merged / multi-tenant (memory > 1: BitDelta holds less; latency > 1: BitDelta is faster)")


if __name__ == "__main__":
    main()
