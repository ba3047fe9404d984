"""The ``zoo`` command line: ``zoo list | info | download | load | publish | train | finetune | convert``,
plus the commands each method adds (``zoo chess …``, ``zoo rcg …``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from zoo import registry
from zoo._cli import ArgumentParser, add_model_argument, load_model, print_json
from zoo.errors import ZooError
from zoo.io import human_bytes, storage_error


# ----------------------------------------------------------------------------- tables
def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def _entry_size(entry: registry.ModelEntry) -> str:
    """The zoo repo's size; for an unreleased entry, the official files' size where known ("~" when stated)."""
    if entry.files:
        return human_bytes(sum(f.size for f in entry.files))
    sizes = [f.size for f in entry.upstream]
    if None not in sizes:
        return human_bytes(sum(sizes))
    return f"~{human_bytes(entry.download_size)}" if entry.download_size else "?"


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
        return _table(rows, header) if rows else "no models match"
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join([f"`{r[0]}`", *r[1:]]) + " |" for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------------------- commands
def cmd_list(args) -> None:
    if args.json:
        print(json.dumps(registry.list_models(args.pattern, args.method)))
    else:
        print(model_table(args.pattern, args.method))


def cmd_info(args) -> None:
    info = registry.info(args.name)
    if args.json:
        print_json(info)
        return
    from zoo.hub import where

    info["source"] = where(registry.get_entry(args.name))
    for key in ("name", "method", "source", "hub_repo", "revision", "license", "paper", "recipe", "base_model"):
        if info.get(key):
            print(f"{key:11s} {info[key]}")
    if info["description"]:
        print(f"{'description':11s} {info['description']}")
    for key in ("metrics", "defaults", "architecture", "convert_args"):
        if info[key]:
            print(f"{key}:")
            for k, v in info[key].items():
                print(f"  {k}: {v}")
    if info["files"]:
        print(f"files (the zoo repo, {'at commit ' + info['revision'] if info['revision'] else 'on main'}):")
        print(_table([[f["path"], human_bytes(f["size"]), f["sha256"]] for f in info["files"]],
                     ["path", "size", "sha256"]))
    if info["upstream"]:
        print("upstream files (converted by " + info["converter"] + ("" if info["files"] else " on first load") + "):")
        approx = f"~{human_bytes(info['download_size'])}" if info["download_size"] else "?"
        print(_table([[f["path"], human_bytes(f["size"]) if f["size"] else approx,
                       f["sha256"] or "(pinned on first download)", f["url"]] for f in info["upstream"]],
                     ["path", "size", "sha256", "url"]))


def cmd_download(args) -> None:
    from zoo.hub import download

    print(download(args.name, revision=args.revision))


def cmd_load(args) -> None:
    model = load_model(args)
    n = sum(p.numel() for p in model.parameters())
    print(f"{type(model).__name__} ({model.model_type}), {n:,} parameters, "
          f"dtype {next(model.parameters()).dtype}, device {next(model.parameters()).device}")


def cmd_publish(args) -> None:
    from zoo.loading import load, parse_dtype
    from zoo.module import ZooModule
    from zoo.publishing import publish

    card = None
    if args.card:
        from zoo.card import load_card

        card = load_card(args.card)  # checked before the model loads, so a bad card leaves nothing behind
    try:
        dtype = parse_dtype(args.dtype)
    except ValueError:
        raise SystemExit(f"--dtype {args.dtype!r} is not a floating torch dtype; use e.g. bfloat16 or float16") from None
    src = ZooModule.from_checkpoint(args.source) if args.source.endswith(".ckpt") else load(args.source)
    if dtype is not None:
        src = src.store_as_(dtype)
    result = publish(src, args.repo, card=card, endpoint=args.endpoint, token=args.token, private=args.private,
                     max_shard_bytes=int(args.max_shard_mb * 1024**2))
    print(f"repo   {result['repo']}")
    if result["commit"]:
        print(f"commit {result['commit']}  (pin this as the catalog entry's revision)")
    print(_table([[n, f["sha256"], str(f["size"])] for n, f in result["files"].items()], ["file", "sha256", "bytes"]))


def cmd_train(args) -> None:
    """``zoo train``, and ``zoo finetune`` (which names the model to start from)."""
    from zoo.train import final_checkpoints, run_recipe

    cli = run_recipe(args.recipe, args.overrides, init_from=getattr(args, "name", None), ckpt_path=args.ckpt_path)
    for path in final_checkpoints(cli.trainer):
        print(f"final state: {path} (`zoo publish {path} FOLDER` makes a repo of it)")


def cmd_recipe(args) -> None:
    from zoo.recipes import copy_recipe, find_recipe, list_recipes

    if args.name is None:
        print("\n".join(list_recipes()))
    elif args.out:
        print(copy_recipe(args.name, args.out))
    else:
        path = find_recipe(args.name)
        print("\n".join(sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()))
              if path.is_dir() else path.read_text(encoding="utf-8"), end="" if path.is_file() else "\n")


def cmd_release(args) -> None:
    from zoo.release import plan, release

    if args.dry_run:
        rows = plan(args.names or None)
        if args.json:
            print_json(rows)
            return
        for row in rows:
            print(f"{row['name']}  ->  hf://{row['hub_repo']}@{row['revision'] or 'main'}")
            print(f"  action: {row['action']}")
            for path, pin in row["files"].items():
                print(f"  {path:32s} {pin['sha256']}  {pin['size']:>10d} B")
            for url in row["upstream"]:
                print(f"  upstream {url}")
        return
    result = release(args.names or None, endpoint=args.endpoint, token=args.token, pins_out=args.pins_out,
                     message=args.message)
    print(f"released {len(result['released'])}, skipped {len(result['skipped'])}; pins written to "
          f"{', '.join(result['pins_files']) or 'nothing'} (review them with `git diff`)")


# ----------------------------------------------------------------------------- parser
def _add_hub_options(p) -> None:
    p.add_argument("--endpoint", help="Hub endpoint (default: $ZOO_HF_ENDPOINT or huggingface.co)")
    p.add_argument("--token", help="Hub token (default: huggingface_hub's login)")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="zoo", description="A PyTorch Lightning model zoo with pretrained checkpoints.")
    parser.add_argument("--version", action="version", version=f"zoo {__import__('zoo').__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = commands.add_parser("list", help="list catalog models")
    p.add_argument("pattern", nargs="?", help="shell-style name pattern, e.g. 'chess-*'")
    p.add_argument("--method", help="only this method's models")
    p.add_argument("--json", action="store_true", help="print names as JSON")
    p.set_defaults(func=cmd_list)

    p = commands.add_parser("info", help="show a model's catalog entry")
    p.add_argument("name", help="catalog name")
    p.add_argument("--json", action="store_true", help="print the entry as JSON")
    p.set_defaults(func=cmd_info)

    p = commands.add_parser("download", help="fetch and verify a model's files; print their folder")
    p.add_argument("name", help="catalog name or hf://owner/repo")
    p.add_argument("--revision", help="Hub branch, tag or commit (default: the catalog's pinned commit, or main)")
    p.set_defaults(func=cmd_download)

    p = commands.add_parser("load", help="load a model and print a summary")
    add_model_argument(p, revision=True)
    p.set_defaults(func=cmd_load)

    p = commands.add_parser("publish", help="write a model as a Hub repo into a folder, or upload it (hf://owner/name)")
    p.add_argument("source", help="catalog name, local repo folder, or a Lightning .ckpt of a zoo module (a BitDelta "
                   "one publishes as its delta)")
    p.add_argument("repo", help="a folder (e.g. hub/my-model) or hf://owner/name")
    from zoo.card import CARD_SUMMARY

    p.add_argument("--card", help=f"model card file: {CARD_SUMMARY}")
    _add_hub_options(p)
    p.add_argument("--private", action="store_true", help="create the Hub repo private")
    p.add_argument("--max-shard-mb", type=float, default=2048, help="shard model.safetensors above this size")
    p.add_argument("--dtype", help="cast floating weights first, e.g. bfloat16 to halve a small model's download "
                   "(a BitDelta: its carried full-precision tensors; they still run in the base's dtype)")
    p.set_defaults(func=cmd_publish)

    p = commands.add_parser("train", help="run a recipe (LightningCLI YAML) from scratch")
    p.add_argument("recipe", help="a recipe file, e.g. the one `zoo recipe escaip/tiny_emt --out tiny_emt.yaml` "
                   "copies; further --a.b=c arguments override the recipe")
    p.add_argument("--ckpt-path", help="resume from this Lightning checkpoint, or 'last' (the newest last.ckpt of the "
                   "recipe's ModelCheckpoint, if any: safe to pass on a first run)")
    p.set_defaults(func=cmd_train)

    p = commands.add_parser("finetune", help="run a recipe starting from a pretrained model's weights")
    p.add_argument("name", help="catalog name, hf://owner/repo or a local repo folder")
    p.add_argument("recipe", help="a recipe file for the same module, e.g. for escaip-tiny-emt the one `zoo recipe "
                   "escaip/tiny_emt --out tiny_emt.yaml` copies; further --a.b=c arguments override it")
    p.add_argument("--ckpt-path", help="resume an interrupted fine-tune from this Lightning checkpoint, or 'last'")
    p.set_defaults(func=cmd_train)

    p = commands.add_parser("recipe", help="list the training recipes, print one, or copy one (works from an installed zoo)")
    p.add_argument("name", nargs="?", help="e.g. chess/small_cpu (a .yaml is implied) or a folder such as chess")
    p.add_argument("--out", help="copy the recipe (or folder) here instead of printing it")
    p.set_defaults(func=cmd_recipe)

    p = commands.add_parser("release", help="publish catalog models to their Hub homes and write their pins back")
    p.add_argument("names", nargs="*", help="catalog names (default: every entry)")
    p.add_argument("--dry-run", action="store_true", help="list each entry's Hub home, pins and action; change nothing")
    p.add_argument("--json", action="store_true", help="with --dry-run: print the plan as JSON")
    _add_hub_options(p)
    p.add_argument("--pins-out", help="write the pins to this JSON file instead of each method's pins.json")
    p.add_argument("--message", help="commit message (default: 'zoo release of NAME')")
    p.set_defaults(func=cmd_release)

    convert = commands.add_parser("convert", help="convert official checkpoints into zoo repos")
    converters = convert.add_subparsers(dest="method", metavar="METHOD", required=True)
    for hook in registry.cli_hooks().values():
        hook(commands, converters)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except KeyboardInterrupt:
        # every write is atomic and every download resumes, so what an interrupt leaves is safe to run again
        print("zoo: interrupted (Ctrl-C); run the command again to go on", file=sys.stderr)
        return 130


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, overrides = parser.parse_known_args(argv)
    if args.command in ("train", "finetune"):
        args.overrides = overrides
    elif overrides:
        parser.error(f"unrecognized arguments: {' '.join(overrides)}")
    try:
        args.func(args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe (`zoo list | head`) is caught below
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
