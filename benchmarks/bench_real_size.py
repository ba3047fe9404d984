"""Official checkpoints at their real size: convert, load and run each one on CPU.

For each model a full-size official-format file with random weights is written into a scratch folder
(``_official_files.py``; deleted afterwards unless ``--keep``), then, each step in a fresh process:

* convert it with the catalog's converter: wall time and peak RSS, against the source file's size;
* ``zoo.load`` the converted repo (strict): wall time ("cold" = fresh process; the file is in the page cache);
* parity: the converted-and-reloaded model against the converter's module built straight from the source file
  (the same random weights), max abs difference on a few inputs;
* speed of the main task on CPU at 1 and 2 threads.

    python benchmarks/bench_real_size.py chess        # one of rcg, chess, escaip, bitdelta (each a few minutes)
    python benchmarks/bench_real_size.py all --keep /tmp/official
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _official_files as of  # noqa: E402

GB = 1e9


def _convert(label: str, body: str, sources: list[Path], out: Path, setup: str = "import torch, zoo") -> dict:
    r = of.run_measured(body, setup=setup)
    src = max(of.dir_bytes(p) for p in sources)
    return {"model": label, "source_GB": sum(of.dir_bytes(p) for p in sources) / GB, "largest_source_GB": src / GB,
            "converted_GB": of.dir_bytes(out) / GB, "convert_s": r["seconds"], "peak_rss_GB": r["peak_rss"] / GB,
            "baseline_rss_GB": r["baseline_rss"] / GB, "rss_over_source": r["peak_rss"] / src,
            "added_rss_over_source": (r["peak_rss"] - r["baseline_rss"]) / src}


def _cold_load(out: Path) -> float:
    return of.run_measured(f"m = zoo.load({str(out)!r})")["seconds"]


# ----------------------------------------------------------------------------------------------------- RCG
RCG_PARITY = """
from zoo.rcg.convert import convert_checkpoint, load_official
from zoo.registry import get_entry
entry = get_entry("rcg-imagenet256")
direct = convert_checkpoint([{mage!r}, {rdm!r}], dict(entry.convert_args))
loaded = zoo.load({out!r})
g = torch.Generator().manual_seed(0)
codes = torch.randint(0, 1024, (2, 256), generator=g)
rep = torch.randn(2, 256, generator=g)
masked = torch.rand(2, 256, generator=g) < 0.6
none = torch.zeros(2, 256, dtype=torch.bool)
x = torch.randn(2, 256, generator=g); t = torch.tensor([3, 997])
img = torch.rand(1, 3, 256, 256, generator=g)
with torch.no_grad():
    diff = lambda f: (f(direct) - f(loaded)).abs().max().item()
    result = {{
        "mage_logits": diff(lambda m: m.mage(codes, rep, none, masked)),
        "rdm_x0": diff(lambda m: m.rdm.denoiser(x, t)),
        "encoder_rep": diff(lambda m: m.encoder.represent(img)),
        "vqgan_decode": diff(lambda m: m.vqgan.decode_codes(codes[:1])),
    }}
"""

RCG_SPEED = """
torch.set_num_threads({threads})
pipe = zoo.load({out!r})
result = {{}}
for batch, steps, rdm_steps in {plan!r}:
    timings = {{}}
    pipe.sample(batch, steps=steps, rdm_steps=rdm_steps, batch_size=batch, timings=timings)
    result[str(batch)] = dict(timings, steps=steps, rdm_steps=rdm_steps)
"""


def bench_rcg(scratch: Path, threads=(1, 2)) -> tuple[list[dict], list[str]]:
    mage, rdm = scratch / "mage-vitl.pth", scratch / "rdm-mocov3vitl.pth"
    if not mage.exists():
        of.write_mage(mage)
    if not rdm.exists():
        of.write_rdm(rdm)
    out = scratch / "rcg-imagenet256"
    row = _convert("rcg-imagenet256 (MAGE-L + RDM-L)", f"""
from zoo.rcg.convert import from_upstream
from zoo.registry import get_entry
from pathlib import Path
from_upstream({{"mage": Path({str(mage)!r}), "rdm": Path({str(rdm)!r})}}, Path({str(out)!r}), get_entry("rcg-imagenet256"))
""", [mage, rdm], out, setup="import torch, zoo, zoo.rcg.convert, zoo.rcg.pipeline")
    row["cold_load_s"] = _cold_load(out)
    row["parity"] = of.run_measured(RCG_PARITY.format(mage=str(mage), rdm=str(rdm), out=str(out)))["result"]
    notes = []
    # MAGE-L on 2 cores: ~0.4 TFLOP per image and MAGE iteration (with CFG's doubled batch), so the official 20
    # iterations / 250 DDIM steps are measured at fewer steps and projected linearly per stage (rdm, mage)
    plan = [(1, 2, 25), (16, 1, 25)]
    for n in threads:
        r = of.run_measured(RCG_SPEED.format(threads=n, out=str(out), plan=plan))["result"]
        for batch, stats in r.items():
            measured = stats["rdm"] + stats["mage"] + stats["vqgan"]
            full = stats["rdm"] * 250 / stats["rdm_steps"] + stats["mage"] * 20 / stats["steps"] + stats["vqgan"]
            row[f"img/s b{batch} t{n} (measured)"] = int(batch) / measured
            row[f"img/s b{batch} t{n} (official steps)"] = int(batch) / full
            notes.append(f"rcg b{batch} t{n}: measured MAGE {stats['steps']}/20 iterations, RDM {stats['rdm_steps']}"
                         f"/250 DDIM steps: rdm {stats['rdm']:.1f}s mage {stats['mage']:.1f}s vqgan {stats['vqgan']:.1f}s;"
                         f" projected to 20/250: {full:.0f}s per batch")
    return [row], notes


# --------------------------------------------------------------------------------------------------- chess
CHESS_PARITY = """
import numpy as np
from zoo.chess.convert import haiku_to_state_dict, infer_config, read_params
from zoo.chess.model import ChessTransformer
params = read_params({zip!r})
cfg = infer_config(params, policy="action_value", num_heads=8)
direct = ChessTransformer(cfg)
direct.load_state_dict(haiku_to_state_dict(params, cfg.num_layers))
del params
loaded = zoo.load({out!r}).model.eval()
seq = torch.randint(0, 31, (4, 79), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    result = {{"log_probs": (direct.eval()(seq) - loaded(seq)).abs().max().item()}}
"""

CHESS_SPEED = """
import random, chess
from zoo.chess.engine import ChessEngine
torch.set_num_threads({threads})
engine = ChessEngine(zoo.load({out!r}))
rng = random.Random(0)
boards = []
for _ in range({positions}):
    b = chess.Board()
    for _ in range(rng.randrange(6, 30)):
        moves = list(b.legal_moves)
        if not moves: break
        b.push(rng.choice(moves))
    boards.append(b)
engine.play(chess.Board())  # warm-up
n_moves = sum(b.legal_moves.count() for b in boards)
t0 = time.perf_counter()
for b in boards:
    engine.play(b)
dt = time.perf_counter() - t0
result = {{"moves_valued_per_s": n_moves / dt, "positions_per_s": len(boards) / dt, "legal_moves": n_moves}}
"""


def bench_chess(scratch: Path, threads=(1, 2), sizes=("9M", "136M", "270M")) -> tuple[list[dict], list[str]]:
    rows, notes = [], []
    for size in sizes:
        src = scratch / f"{size}.zip"
        if not src.exists():
            of.write_chess_zip(src, size)
        name = {"9M": "chess-9m", "136M": "chess-136m", "270M": "chess-270m"}[size]
        out = scratch / name
        row = _convert(name, f"""
from zoo.chess.convert import from_upstream
from zoo.registry import get_entry
from pathlib import Path
from_upstream({{"{size}.zip": Path({str(src)!r})}}, Path({str(out)!r}), get_entry({name!r}))
""", [src], out, setup="import torch, zoo, zoo.chess.convert, zoo.chess.module, tensorstore, safetensors.torch")
        row["cold_load_s"] = _cold_load(out)
        row["parity"] = of.run_measured(CHESS_PARITY.format(zip=str(src), out=str(out)),
                                        setup="import torch, zoo, tensorstore")["result"]
        if size == "270M":
            for n in threads:
                r = of.run_measured(CHESS_SPEED.format(threads=n, out=str(out), positions=3))["result"]
                row[f"moves valued/s t{n}"] = r["moves_valued_per_s"]
                row[f"positions/s t{n}"] = r["positions_per_s"]
                notes.append(f"chess-270m t{n}: engine.play on 3 random-playout positions ({r['legal_moves']} legal "
                             "moves, one forward per legal move as the official engine), after one warm-up move")
        rows.append(row)
    return rows, notes


# --------------------------------------------------------------------------------------------------- EScAIP
ESCAIP_PARITY = """
from ase.build import bulk
from zoo.escaip.convert import _build, _task_scaling, load_inference_checkpoint
from zoo.escaip.data import atoms_to_batch
ckpt = load_inference_checkpoint({src!r})
bb = ckpt.model_config["backbone"]
direct = _build(bb, ckpt.model_config["heads"], dict(ckpt.model_state_dict),
                _task_scaling(ckpt.tasks_config, None, int(bb["max_num_elements"]))).eval()
loaded = zoo.load({out!r})
atoms = bulk("Cu", cubic=True).repeat((2, 2, 3)); atoms.rattle(0.05, seed=0)
batch = atoms_to_batch([atoms])
a, b = direct.predict(batch), loaded.predict(batch)
result = {{k: (a[k] - b[k]).abs().max().item() for k in a}}
"""

ESCAIP_SPEED = """
from ase.build import bulk
from zoo.escaip.data import atoms_to_batch
torch.set_num_threads({threads})
model = zoo.load({out!r})
atoms = bulk("Cu", cubic=True).repeat((5, 5, 10)); atoms.rattle(0.05, seed=0)   # 1,000 atoms
batch = atoms_to_batch([atoms])
t0 = time.perf_counter(); model.predict(batch); dt = time.perf_counter() - t0
result = {{"atoms": len(atoms), "seconds": dt, "atoms_per_s": len(atoms) / dt}}
"""


def bench_escaip(scratch: Path, threads=(1, 2)) -> tuple[list[dict], list[str]]:
    src = scratch / "escaip-h1024l8.pt"
    if not src.exists():
        of.write_escaip_checkpoint(src)
    out = scratch / "escaip-h1024l8"
    row = _convert("escaip H1024L8 (OC20 paper config)", f"""
from zoo.escaip.convert import convert_checkpoint
convert_checkpoint({str(src)!r}, {str(out)!r})
""", [src], out, setup="import torch, zoo, zoo.escaip.convert")
    row["cold_load_s"] = _cold_load(out)
    row["parity"] = of.run_measured(ESCAIP_PARITY.format(src=str(src), out=str(out)))["result"]
    notes = []
    for n in threads:
        r = of.run_measured(ESCAIP_SPEED.format(threads=n, out=str(out)))["result"]
        row[f"atoms/s t{n}"] = r["atoms_per_s"]
    notes.append("escaip: one forward (energy + direct forces) of a 1,000-atom Cu cell, k 30 / pad 45 / 6 Å, "
                 "no warm-up call (a warm-up costs as much as the run)")
    return [row], notes


# ------------------------------------------------------------------------------------------------- BitDelta
BITDELTA_REDUCED = """
from zoo.bitdelta.delta import BitDelta
from zoo.bitdelta._base import load_model
from zoo.io import weights_fingerprint
full = BitDelta.load({out!r})
keep = lambda name: not name.startswith("model.layers.") or int(name.split(".")[2]) < {layers}
base = load_model({base!r}, dtype=torch.bfloat16)
def reduced(scale):
    return BitDelta(masks={{k: v for k, v in full.masks.items() if keep(k)}},
                    scales={{k: v * scale for k, v in full.scales.items() if keep(k)}},
                    shapes={{k: v for k, v in full.shapes.items() if keep(k)}},
                    params={{k: v for k, v in full.params.items() if keep(k)}},
                    base={base!r}, base_sha256=weights_fingerprint(base), base_dtype="bfloat16")
reduced(1.0).save({red_a!r}); reduced(-0.5).save({red_b!r})
result = len(reduced(1.0).masks)
"""

BITDELTA_PARITY = """
from zoo.bitdelta.delta import BitDelta
from zoo.bitdelta.serve import MultiTenantLM
from zoo.bitdelta._base import load_model
from zoo.bitdelta.convert import read_official
# 1. the full-size conversion read back strictly: every tensor as in the official file
src, conv = read_official({src!r}), BitDelta.load({out!r}).state_dict()
exact = set(src) == set(conv) and all(torch.equal(src[k].reshape(conv[k].shape).to(conv[k].dtype), conv[k]) for k in src)
# 2. reduced-layer forward: zoo.load (merged) vs the spec's reconstruction W = W_base + coeff * (2 bit - 1) by hand
delta = BitDelta.load({red_a!r})
ref = load_model({base!r}, dtype=torch.bfloat16)
sd = ref.state_dict()
shifts = torch.arange(32, dtype=torch.int32)
for name in delta.masks:
    words = delta.masks[name]                                  # (in/32, out) int32, LSB first along the input
    bits = ((words.unsqueeze(1) >> shifts.view(1, 32, 1)) & 1).reshape(-1, words.shape[1])  # (in, out)
    sign = (2 * bits.float() - 1) * delta.scales[name]
    sd[name + ".weight"] += sign.T.to(torch.bfloat16)
for k, v in delta.params.items():
    sd[k] = v
ref.resize_token_embeddings(delta.params["model.embed_tokens.weight"].shape[0])
ref.load_state_dict(sd, strict=False, assign=True)
ref.model.embed_tokens.weight.data = delta.params["model.embed_tokens.weight"]
ref.lm_head.weight.data = delta.params["lm_head.weight"]
ids = torch.randint(0, 32000, (2, 8), generator=torch.Generator().manual_seed(0))
merged = zoo.load({red_a!r})
with torch.no_grad():
    a = ref(ids).logits.float(); b = merged(ids).logits.float()
    server = MultiTenantLM.from_repos([{red_a!r}, {red_b!r}])
    other = zoo.load({red_b!r})
    mt = server(ids, tenants=[0, 1]).logits.float()
    result = {{"full_size_tensors_exact": exact, "merged_vs_spec_reconstruction": (a - b).abs().max().item(),
              "logit_scale": a.abs().max().item(),
              "multitenant_vs_merged": max((mt[0] - b[0]).abs().max().item(), (mt[1] - other(ids).logits.float()[1]).abs().max().item())}}
"""

BITDELTA_SPEED = """
from zoo.bitdelta.serve import MultiTenantLM
torch.set_num_threads({threads})
T = {tokens}
ids = torch.randint(0, 32000, (2, T), generator=torch.Generator().manual_seed(0))

def timed(model, call):
    layers = None
    for m in model.modules():
        if type(m).__name__ == "ModuleList" and len(m) == {layers}:
            layers = m
    marks = {{}}
    h1 = layers[0].register_forward_pre_hook(lambda *a: marks.__setitem__("start", time.perf_counter()))
    h2 = layers[-1].register_forward_hook(lambda *a: marks.__setitem__("end", time.perf_counter()))
    with torch.no_grad():
        call()  # warm-up
        t0 = time.perf_counter(); call(); total = time.perf_counter() - t0
    h1.remove(); h2.remove()
    return total, marks["end"] - marks["start"]

merged = zoo.load({red_a!r})
tot_m, lay_m = timed(merged, lambda: merged(ids[:1]))
del merged
server = MultiTenantLM.from_repos([{red_a!r}, {red_b!r}])
tot_t, lay_t = timed(server, lambda: server(ids, tenants=[0, 1]))
full = lambda tot, lay: tot - lay + lay * 32 / {layers}
result = {{"merged_tok_s": T / tot_m, "multitenant_tok_s": 2 * T / tot_t,
          "merged_full_tok_s": T / full(tot_m, lay_m), "multitenant_full_tok_s": 2 * T / full(tot_t, lay_t),
          "merged_s": tot_m, "merged_layers_s": lay_m, "mt_s": tot_t, "mt_layers_s": lay_t}}
"""


def bench_bitdelta(scratch: Path, threads=(1, 2), layers: int = 2, tokens: int = 64) -> tuple[list[dict], list[str]]:
    src = scratch / "diff.pt"
    if not src.exists():
        of.write_bitdelta_diff(src)
    out = scratch / "bitdelta-mistral-7b"
    row = _convert("bitdelta-mistral-7b (diff.pt)", f"""
from zoo.bitdelta.convert import from_upstream
from zoo.registry import get_entry
from pathlib import Path
from_upstream({{"diff.pt": Path({str(src)!r})}}, Path({str(out)!r}), get_entry("bitdelta-mistral-7b-openchat-3.5"))
""", [src], out, setup="import torch, zoo, zoo.bitdelta.convert")
    row["cold_load_s"] = float("nan")  # needs the 7B base: the reduced-layer model's load is timed below
    base, red_a, red_b = scratch / "mistral-base-reduced", scratch / "delta-reduced-a", scratch / "delta-reduced-b"
    if not base.exists():
        of.write_mistral_base(base, num_layers=layers)
    fmt = dict(out=str(out), base=str(base), red_a=str(red_a), red_b=str(red_b), layers=layers, src=str(src))
    of.run_measured(BITDELTA_REDUCED.format(**fmt))
    row["cold_load_s (reduced)"] = _cold_load(red_a)
    row["parity"] = of.run_measured(BITDELTA_PARITY.format(**fmt))["result"]
    notes = []
    for n in threads:
        r = of.run_measured(BITDELTA_SPEED.format(threads=n, tokens=tokens, **fmt))["result"]
        row[f"tok/s merged t{n} ({layers}L)"] = r["merged_tok_s"]
        row[f"tok/s multi-tenant t{n} ({layers}L)"] = r["multitenant_tok_s"]
        row[f"tok/s merged t{n} (32L, math)"] = r["merged_full_tok_s"]
        row[f"tok/s multi-tenant t{n} (32L, math)"] = r["multitenant_full_tok_s"]
        notes.append(f"bitdelta t{n}: {layers}-layer Mistral-7B-shaped base (bf16) + the converted full-size diff's "
                     f"first {layers} layers; one forward of {tokens} tokens (merged: 1 row; multi-tenant: 2 rows, 2 "
                     f"tenants). Measured {r['merged_s']:.2f}s merged ({r['merged_layers_s']:.2f}s in the decoder "
                     f"layers), {r['mt_s']:.2f}s multi-tenant ({r['mt_layers_s']:.2f}s in layers). Full model: "
                     f"t32 = t_total - t_layers + t_layers * 32/{layers} (embeddings, final norm and lm_head once)")
    return [row], notes


# ------------------------------------------------------------------------------------------------------ table
BENCHES = {"rcg": bench_rcg, "chess": bench_chess, "escaip": bench_escaip, "bitdelta": bench_bitdelta}


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if v != v else (f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}")
    if isinstance(v, dict):
        return ", ".join(f"{k} {_fmt(x)}" for k, x in v.items())
    return str(v)


def print_table(rows: list[dict], notes: list[str]) -> None:
    for row in rows:
        print(f"\n| {row['model']} | |\n|---|---|")
        for key, value in row.items():
            if key != "model":
                print(f"| {key} | {_fmt(value)} |")
    for note in notes:
        print(f"- {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("methods", nargs="+", choices=[*BENCHES, "all"])
    parser.add_argument("--keep", type=Path, help="scratch folder to keep (and reuse) the generated files in")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    methods = list(BENCHES) if "all" in args.methods else args.methods
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="zoo-real-size-", dir="/tmp"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        for method in methods:
            rows, notes = BENCHES[method](scratch, threads=tuple(args.threads))
            print_table(rows, notes)
            sys.stdout.flush()
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
