"""The ``zoo`` command line: ``zoo list | info | download | load | publish | train | finetune | convert``,
plus the commands each method adds (``zoo chess …``, ``zoo rcg …``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from zoo import registry
from zoo._cli import ArgumentParser, ModelOptions, arg, command, commands, load_model, option, options, print_json, rest
from zoo.card import CARD_SUMMARY
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
@options
class ListOptions:
    pattern: str | None = arg("shell-style name pattern, e.g. 'chess-*'", None)
    method: str | None = option(None, "only this method's models")
    json: bool = option(False, "print names as JSON")


def cmd_list(o: ListOptions) -> None:
    print(json.dumps(registry.list_models(o.pattern, o.method)) if o.json else model_table(o.pattern, o.method))


@options
class InfoOptions:
    name: str = arg("catalog name")
    json: bool = option(False, "print the entry as JSON")


def cmd_info(o: InfoOptions) -> None:
    info = registry.info(o.name)
    if o.json:
        print_json(info)
        return
    from zoo.hub import where

    info["source"] = where(registry.get_entry(o.name))
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


_REVISION = "Hub branch, tag or commit (default: the catalog's pinned commit, or main)"


@options
class DownloadOptions:
    name: str = arg("catalog name or hf://owner/repo")
    revision: str | None = option(None, _REVISION)


def cmd_download(o: DownloadOptions) -> None:
    from zoo.hub import download

    print(download(o.name, revision=o.revision))


@options
class LoadOptions(ModelOptions):
    revision: str | None = option(None, _REVISION)


def cmd_load(o: LoadOptions) -> None:
    model = load_model(o)
    n = sum(p.numel() for p in model.parameters())
    print(f"{type(model).__name__} ({model.model_type}), {n:,} parameters, "
          f"dtype {next(model.parameters()).dtype}, device {next(model.parameters()).device}")


@options
class HubOptions:
    endpoint: str | None = option(None, "Hub endpoint (default: $ZOO_HF_ENDPOINT or huggingface.co)")
    token: str | None = option(None, "Hub token (default: huggingface_hub's login)")


@options
class PublishOptions(HubOptions):
    source: str = arg("catalog name, local repo folder, or a Lightning .ckpt of a zoo module (a BitDelta one "
                      "publishes as its delta)")
    repo: str = arg("a folder (e.g. hub/my-model) or hf://owner/name")
    card: str | None = option(None, f"model card file: {CARD_SUMMARY}")
    private: bool = option(False, "create the Hub repo private")
    max_shard_mb: float = option(2048, "shard model.safetensors above this size")
    dtype: str | None = option(None, "cast floating weights first, e.g. bfloat16 to halve a small model's download "
                               "(a BitDelta: its carried full-precision tensors; they still run in the base's dtype)")


def cmd_publish(o: PublishOptions) -> None:
    import zoo
    from zoo.module import ZooModule, parse_dtype

    card = None
    if o.card:
        from zoo.card import load_card

        card = load_card(o.card)  # checked before the model loads, so a bad card leaves nothing behind
    try:
        dtype = parse_dtype(o.dtype)
    except ValueError:
        raise SystemExit(f"--dtype {o.dtype!r} is not a floating torch dtype; use e.g. bfloat16 or float16") from None
    # TODO(copies): zoo.load reads a .ckpt once the lazy exports fold zoo/loading.py in
    src = ZooModule.from_checkpoint(o.source) if o.source.endswith(".ckpt") else zoo.load(o.source)
    if dtype is not None:
        src = src.store_as_(dtype)
    result = zoo.publish(src, o.repo, card=card, endpoint=o.endpoint, token=o.token, private=o.private,
                         max_shard_bytes=int(o.max_shard_mb * 1024**2))
    print(f"repo   {result['repo']}")
    if result["commit"]:
        print(f"commit {result['commit']}  (pin this as the catalog entry's revision)")
    print(_table([[n, f["sha256"], str(f["size"])] for n, f in result["files"].items()], ["file", "sha256", "bytes"]))


@options
class TrainOptions:
    recipe: str = arg("a recipe file, e.g. the one `zoo recipe escaip/tiny_emt --out tiny_emt.yaml` copies; further "
                      "--a.b=c arguments override the recipe")
    ckpt_path: str | None = option(None, "resume from this Lightning checkpoint, or 'last' (the newest last.ckpt of "
                                   "the recipe's ModelCheckpoint, if any: safe to pass on a first run)")
    overrides: list[str] = rest()


@options
class FinetuneOptions:
    name: str = arg("catalog name, hf://owner/repo or a local repo folder")
    recipe: str = arg("a recipe file for the same module, e.g. for escaip-tiny-emt the one `zoo recipe escaip/tiny_emt "
                      "--out tiny_emt.yaml` copies; further --a.b=c arguments override it")
    ckpt_path: str | None = option(None, "resume an interrupted fine-tune from this Lightning checkpoint, or 'last'")
    overrides: list[str] = rest()


def cmd_train(o: TrainOptions | FinetuneOptions) -> None:
    """``zoo train``, and ``zoo finetune`` (which names the model to start from)."""
    from zoo.train import final_checkpoints, run_recipe

    cli = run_recipe(o.recipe, o.overrides, init_from=getattr(o, "name", None), ckpt_path=o.ckpt_path)
    for path in final_checkpoints(cli.trainer):
        print(f"final state: {path} (`zoo publish {path} FOLDER` makes a repo of it)")


@options
class RecipeOptions:
    name: str | None = arg("e.g. chess/small_cpu (a .yaml is implied) or a folder such as chess", None)
    out: str | None = option(None, "copy the recipe (or folder) here instead of printing it")


def cmd_recipe(o: RecipeOptions) -> None:
    from zoo.recipes import copy_recipe, find_recipe, list_recipes

    if o.name is None:
        print("\n".join(list_recipes()))
    elif o.out:
        print(copy_recipe(o.name, o.out))
    else:
        path = find_recipe(o.name)
        print("\n".join(sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()))
              if path.is_dir() else path.read_text(encoding="utf-8"), end="" if path.is_file() else "\n")


@options
class ReleaseOptions(HubOptions):
    names: list[str] | None = arg("catalog names (default: every entry)", None, nargs="*")
    dry_run: bool = option(False, "list each entry's Hub home, pins and action; change nothing")
    json: bool = option(False, "with --dry-run: print the plan as JSON")
    pins_out: str | None = option(None, "write the pins to this JSON file instead of each method's pins.json")
    message: str | None = option(None, "commit message (default: 'zoo release of NAME')")


def cmd_release(o: ReleaseOptions) -> None:
    from zoo.release import plan, release

    if not o.dry_run:
        result = release(o.names or None, endpoint=o.endpoint, token=o.token, pins_out=o.pins_out, message=o.message)
        print(f"released {len(result['released'])}, skipped {len(result['skipped'])}; pins written to "
              f"{', '.join(result['pins_files']) or 'nothing'} (review them with `git diff`)")
    elif o.json:
        print_json(plan(o.names or None))
    else:
        for row in plan(o.names or None):
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
    command(sub, "list", cmd_list, "list catalog models")
    command(sub, "info", cmd_info, "show a model's catalog entry")
    command(sub, "download", cmd_download, "fetch and verify a model's files; print their folder")
    command(sub, "load", cmd_load, "load a model and print a summary")
    command(sub, "publish", cmd_publish, "write a model as a Hub repo into a folder, or upload it (hf://owner/name)")
    command(sub, "train", cmd_train, "run a recipe (LightningCLI YAML) from scratch", TrainOptions)
    command(sub, "finetune", cmd_train, "run a recipe starting from a pretrained model's weights", FinetuneOptions)
    command(sub, "recipe", cmd_recipe, "list the training recipes, print one, or copy one (works from an installed zoo)")
    command(sub, "release", cmd_release, "publish catalog models to their Hub homes and write their pins back")
    converters = commands(sub, "convert", "convert official checkpoints into zoo repos", "METHOD")
    for hook in registry.cli_hooks().values():
        hook(sub, converters)
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
    if getattr(args, "rest", None):
        setattr(args, args.rest, overrides)
    elif overrides:
        parser.error(f"unrecognized arguments: {' '.join(overrides)}")
    try:
        args.run(args)
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
