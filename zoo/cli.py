"""The ``zoo`` command line: the core's commands (``zoo list``, ``zoo publish`` ...), ``zoo convert METHOD`` and each
method's own (``zoo chess ...``); each command is an options dataclass with its ``run()`` (see :mod:`zoo._cli`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from zoo import registry
from zoo._cli import ArgumentParser, Commands, ModelOptions, Options, arg, load_model, option, print_json, rest, table
from zoo.card import CARD_SUMMARY, load_card
from zoo.errors import ZooError
from zoo.io import human_bytes, storage_error


# ----------------------------------------------------------------------------- tables
def _stated_size(size: int | None) -> str:
    """The official files' size as their sources state it (approximate), or "?"."""
    return f"~{human_bytes(size)}" if size else "?"


def _entry_size(entry: registry.ModelEntry) -> str:
    """The zoo repo's size; for an unreleased entry, the official files' size where known, else as stated."""
    if entry.files:
        return human_bytes(sum(f.size for f in entry.files))
    sizes = [f.size for f in entry.upstream]
    return _stated_size(entry.download_size) if None in sizes else human_bytes(sum(sizes))


def model_table(pattern: str | None = None, method: str | None = None, markdown: bool = False) -> str:
    """The catalog as a table (plain text for `zoo list`, Markdown for the README)."""
    from zoo.hub import where

    rows = []
    for name in registry.list_models(pattern, method):
        e = registry.get_entry(name)
        numeric = [(k, v) for k, v in e.metrics.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and not k.startswith("num_")]
        metrics = ", ".join(f"{k} {v:g}" for k, v in numeric[:3])
        rows.append([name, e.method, where(e), _entry_size(e), metrics or "-"])
    header = ["name", "method", "source", "size", "metrics"]
    if not markdown:
        return table(rows, header) if rows else "no models match"
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join([f"`{r[0]}`", *r[1:]]) + " |" for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------------------- commands
core = Commands()
_REVISION = "Hub branch, tag or commit (default: the catalog's pinned commit, or main)"


@core.command("list", "list catalog models")
class List(Options):
    pattern: str | None = arg("shell-style name pattern, e.g. 'chess-*'", None)
    method: str | None = option(None, "only this method's models")
    json: bool = option(False, "print names as JSON")

    def run(self) -> None:
        print(json.dumps(registry.list_models(self.pattern, self.method)) if self.json
              else model_table(self.pattern, self.method))


@core.command("info", "show a model's catalog entry")
class Info(Options):
    name: str = arg("catalog name")
    json: bool = option(False, "print the entry as JSON")

    def run(self) -> None:
        info = registry.info(self.name)
        if self.json:
            print_json(info)
            return
        from zoo.hub import where

        info["source"] = where(registry.get_entry(self.name))
        for key in ("name", "method", "source", "hub_repo", "revision", "license", "paper", "recipe", "base_model",
                    "description"):
            if info.get(key):
                print(f"{key:11s} {info[key]}")
        for key in ("metrics", "defaults", "architecture", "convert_args"):
            if info[key]:
                print(f"{key}:\n" + "\n".join(f"  {k}: {v}" for k, v in info[key].items()))
        if info["files"]:
            print(f"files (the zoo repo, {'at commit ' + info['revision'] if info['revision'] else 'on main'}):")
            print(table([[f["path"], human_bytes(f["size"]), f["sha256"]] for f in info["files"]],
                        ["path", "size", "sha256"]))
        if info["upstream"]:
            print(f"upstream files (converted by {info['converter']}{'' if info['files'] else ' on first load'}):")
            print(table([[f["path"], human_bytes(f["size"]) if f["size"] else _stated_size(info["download_size"]),
                          f["sha256"] or "(pinned on first download)", f["url"]] for f in info["upstream"]],
                        ["path", "size", "sha256", "url"]))


@core.command("download", "fetch and verify a model's files; print their folder")
class Download(Options):
    name: str = arg("catalog name or hf://owner/repo")
    revision: str | None = option(None, _REVISION)

    def run(self) -> None:
        from zoo.hub import download

        print(download(self.name, revision=self.revision))


@core.command("load", "load a model and print a summary")
class Load(ModelOptions):
    revision: str | None = option(None, _REVISION)

    def run(self) -> None:
        model = load_model(self)
        first = next(model.parameters())
        print(f"{type(model).__name__} ({model.model_type}), {sum(p.numel() for p in model.parameters()):,} "
              f"parameters, dtype {first.dtype}, device {first.device}")


class HubOptions(Options):
    endpoint: str | None = option(None, "Hub endpoint (default: $ZOO_HF_ENDPOINT or huggingface.co)")
    token: str | None = option(None, "Hub token (default: huggingface_hub's login)")


@core.command("publish", "write a model as a Hub repo into a folder, or upload it (hf://owner/name)")
class Publish(HubOptions):
    source: str = arg("catalog name, local repo folder, or a Lightning .ckpt of a zoo module (a BitDelta one "
                      "publishes as its delta)")
    repo: str = arg("a folder (e.g. hub/my-model) or hf://owner/name")
    card: str | None = option(None, f"model card file: {CARD_SUMMARY}")
    private: bool = option(False, "create the Hub repo private")
    max_shard_mb: float = option(2048, "shard model.safetensors above this size")
    dtype: str | None = option(None, "cast floating weights first, e.g. bfloat16 to halve a small model's download "
                               "(a BitDelta: its carried full-precision tensors; they still run in the base's dtype)")

    def run(self) -> None:
        import zoo
        from zoo.module import parse_dtype

        card = load_card(self.card) if self.card else None  # before the model loads: a bad card leaves nothing
        try:
            dtype = parse_dtype(self.dtype)
        except ValueError:
            raise SystemExit(f"--dtype {self.dtype!r} is not a floating torch dtype; use e.g. bfloat16 or "
                             "float16") from None
        src = zoo.load(self.source)
        if dtype is not None:
            src = src.store_as_(dtype)
        result = zoo.publish(src, self.repo, card=card, endpoint=self.endpoint, token=self.token, private=self.private,
                             max_shard_bytes=int(self.max_shard_mb * 1024**2))
        print(f"repo   {result['repo']}")
        if result["commit"]:
            print(f"commit {result['commit']}  (pin this as the catalog entry's revision)")
        print(table([[n, f["sha256"], str(f["size"])] for n, f in result["files"].items()],
                    ["file", "sha256", "bytes"]))


@core.command("train", "run a recipe (LightningCLI YAML) from scratch")
class Train(Options):
    recipe: str = arg("a recipe file, e.g. the one `zoo recipe escaip/tiny_emt --out tiny_emt.yaml` copies; further "
                      "--a.b=c arguments override the recipe")
    ckpt_path: str | None = option(None, "resume from this Lightning checkpoint, or 'last' (the newest last.ckpt of "
                                   "the recipe's ModelCheckpoint, if any: safe to pass on a first run)")
    overrides: list[str] = rest()

    def run(self) -> None:
        from zoo.train import final_checkpoints, run_recipe

        cli = run_recipe(self.recipe, self.overrides, init_from=getattr(self, "name", None), ckpt_path=self.ckpt_path)
        for path in final_checkpoints(cli.trainer):
            print(f"final state: {path} (`zoo publish {path} FOLDER` makes a repo of it)")


@core.command("finetune", "run a recipe starting from a pretrained model's weights")
class Finetune(Options):
    name: str = arg("catalog name, hf://owner/repo or a local repo folder")
    recipe: str = arg("a recipe file for the same module, e.g. for escaip-tiny-emt the one `zoo recipe escaip/tiny_emt "
                      "--out tiny_emt.yaml` copies; further --a.b=c arguments override it")
    ckpt_path: str | None = option(None, "resume an interrupted fine-tune from this Lightning checkpoint, or 'last'")
    overrides: list[str] = rest()

    run = Train.run  # from the weights of the model `name`


@core.command("recipe", "list the training recipes, print one, or copy one (works from an installed zoo)")
class Recipe(Options):
    name: str | None = arg("e.g. chess/small_cpu (a .yaml is implied) or a folder such as chess", None)
    out: str | None = option(None, "copy the recipe (or folder) here instead of printing it")

    def run(self) -> None:
        from zoo.recipes import copy_recipe, find_recipe, list_recipes

        if self.name is None:
            print("\n".join(list_recipes()))
        elif self.out:
            print(copy_recipe(self.name, self.out))
        elif (path := find_recipe(self.name)).is_dir():
            print("\n".join(sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())))
        else:
            print(path.read_text(encoding="utf-8"), end="")


@core.command("release", "publish catalog models to their Hub homes and write their pins back")
class Release(HubOptions):
    names: list[str] | None = arg("catalog names (default: every entry)", None)
    dry_run: bool = option(False, "list each entry's Hub home, pins and action; change nothing")
    json: bool = option(False, "with --dry-run: print the plan as JSON")
    pins_out: str | None = option(None, "write the pins to this JSON file instead of each method's pins.json")
    message: str | None = option(None, "commit message (default: 'zoo release of NAME')")

    def run(self) -> None:
        from zoo.release import plan, release

        if not self.dry_run:
            result = release(self.names or None, endpoint=self.endpoint, token=self.token, pins_out=self.pins_out,
                             message=self.message)
            print(f"released {len(result['released'])}, skipped {len(result['skipped'])}; pins written to "
                  f"{', '.join(result['pins_files']) or 'nothing'} (review them with `git diff`)")
        elif self.json:
            print_json(plan(self.names or None))
        else:
            for row in plan(self.names or None):
                print(f"{row['name']}  ->  hf://{row['hub_repo']}@{row['revision'] or 'main'}")
                print(f"  action: {row['action']}")
                for path, pin in row["files"].items():
                    print(f"  {path:32s} {pin['sha256']}  {pin['size']:>10d} B")
                for url in row["upstream"]:
                    print(f"  upstream {url}")


# ----------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="zoo", description="A PyTorch Lightning model zoo with pretrained checkpoints.")
    parser.add_argument("--version", action="version", version=f"zoo {__import__('zoo').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    core.register_cli(sub, None)
    convert = sub.add_parser("convert", help="convert official checkpoints into zoo repos")
    converters = convert.add_subparsers(dest="method", metavar="METHOD", required=True)
    for hook in registry.cli_hooks().values():
        hook(sub, converters)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args, overrides = parser.parse_known_args(argv)
        if getattr(args, "rest", None):
            setattr(args, args.rest, overrides)
        elif overrides:
            parser.error(f"unrecognized arguments: {' '.join(overrides)}")
        args.run(args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe (`zoo list | head`) is caught below
    except KeyboardInterrupt:
        # every write is atomic and every download resumes, so what an interrupt leaves is safe to run again
        print("zoo: interrupted (Ctrl-C); run the command again to go on", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout's reader left (`zoo list | head`): what Python flushes at exit goes to /dev/null, not a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (registry.UnknownModelError, FileNotFoundError, ValueError, ZooError) as err:
        print(f"zoo: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a full disk or a read-only folder the command met outside the zoo's own writes
        fault = storage_error(err)
        if fault is None:
            raise
        print(f"zoo: error: {fault}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
