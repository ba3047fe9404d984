import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from toy import ToyRegressor

import zoo
from zoo.cli import main
from zoo.registry import FileSpec, ModelEntry, register_model

ROOT = Path(__file__).resolve().parents[2]


def test_readme_model_table_is_current():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "update_readme.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_list_and_info(capsys):
    register_model(ModelEntry(name="toy-cli", method="toy",
                              files=(FileSpec("model.safetensors", "a" * 64, 2048),), metrics={"mse": 0.25},
                              description="a toy"))
    assert main(["list", "toy-c*"]) == 0
    out = capsys.readouterr().out
    assert "toy-cli" in out and "2.0 KiB" in out and "mse 0.25" in out
    assert main(["list", "--json", "--method", "toy"]) == 0
    assert "toy-cli" in json.loads(capsys.readouterr().out)
    assert main(["info", "toy-cli"]) == 0
    out = capsys.readouterr().out
    assert "a" * 64 in out and "a toy" in out
    assert main(["info", "toy-clj"]) == 2
    assert "Did you mean: toy-cli" in capsys.readouterr().err


def test_every_method_has_help():
    for method in zoo.registry.methods():
        if zoo.registry.get_method(method).cli:
            out = subprocess.run([sys.executable, "-m", "zoo.cli", method, "--help"], capture_output=True, text=True)
            assert out.returncode == 0, out.stderr


def test_load_and_publish_a_folder(tmp_path, capsys):
    ToyRegressor().save_pretrained(tmp_path / "repo")
    assert main(["publish", str(tmp_path / "repo"), str(tmp_path / "copy")]) == 0
    assert "README.md" in capsys.readouterr().out
    assert main(["load", str(tmp_path / "copy"), "--dtype", "float64"]) == 0
    assert "torch.float64" in capsys.readouterr().out


def test_publish_casts_to_a_smaller_dtype(tmp_path, capsys):
    model = ToyRegressor()
    model.save_pretrained(tmp_path / "repo")
    assert main(["publish", str(tmp_path / "repo"), str(tmp_path / "half"), "--dtype", "bfloat16"]) == 0
    half = zoo.load(tmp_path / "half")
    for name, p in half.state_dict().items():
        assert p.dtype == torch.bfloat16
        torch.testing.assert_close(p, model.state_dict()[name].to(torch.bfloat16), rtol=0, atol=0)
    with pytest.raises(SystemExit, match="not a floating torch dtype"):
        main(["publish", str(tmp_path / "repo"), str(tmp_path / "bad"), "--dtype", "int8"])
    assert not (tmp_path / "bad").exists()


# the commands that only read the catalog or print help must not pay for torch and Lightning
_LIGHT_COMMANDS = [["--help"], ["list"], ["list", "--json"], ["info", "escaip-tiny-emt"], ["lsit"],
                   ["download", "escaip-tiny-emt"], ["download", "chess-smal-av"], ["convert", "--help"],
                   ["chess", "--help"], ["chess", "uci", "--help"], ["train", "--help"], ["list", "--help"],
                   ["publish", "--help"]]
_HARNESS = """
import json, sys
from zoo.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "heavy": sorted(m for m in ("torch", "lightning", "torchmetrics") if m in sys.modules)}),
      file=sys.stderr)
"""


@pytest.mark.parametrize("argv", _LIGHT_COMMANDS, ids=" ".join)
def test_light_commands_import_no_torch(argv):
    out = subprocess.run([sys.executable, "-c", _HARNESS, *argv], capture_output=True, text=True)
    result = json.loads(out.stderr.splitlines()[-1])
    assert result["heavy"] == [], out.stderr
    assert result["code"] == (2 if argv in (["lsit"], ["download", "chess-smal-av"]) else 0), out.stderr
    if "--help" in argv:
        assert "usage: zoo" in out.stdout
    if argv[0] == "download" and result["code"] == 0:
        assert (Path(out.stdout.strip()) / "config.json").is_file()


def _parsers(parser):
    """The parser and every sub-command parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_help_shows_every_default():
    from zoo.cli import build_parser

    checked = 0
    for parser in _parsers(build_parser()):
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if action.default in (None, False, argparse.SUPPRESS) or action.help == argparse.SUPPRESS:
                continue
            if not action.option_strings and action.nargs not in ("?", "*"):
                continue  # a required positional has no default to show
            shown = f"(default: {action.default})" in text or "default" in (action.help or "")
            assert shown, f"{parser.prog} {action.option_strings or action.dest}: default {action.default!r} not in help"
            checked += 1
    assert checked > 50


def test_help_cites_no_file_only_a_checkout_has():
    # an installed zoo has no benchmarks/, recipes/ (`zoo recipe` copies one), scripts/ or tests/ to look in
    from zoo.cli import build_parser

    for parser in _parsers(build_parser()):
        add, parser._add_arguments = getattr(parser, "_add_arguments", None), None
        if add:  # options added on first parse (zoo._cli.ArgumentParser)
            add(parser)
        cited = re.findall(r"\b(?:benchmarks|recipes|scripts|tests)/\S+", " ".join(parser.format_help().split()))
        assert not cited, f"{parser.prog} --help cites {cited}"


@pytest.mark.parametrize("command", ["train", "finetune"])
def test_train_help_example_is_a_real_recipe(command, tmp_path):
    # the example works from an installed wheel too: it copies a packaged recipe rather than citing recipes/
    out = subprocess.run([sys.executable, "-m", "zoo.cli", command, "--help"], capture_output=True, text=True)
    example = re.search(r"`zoo recipe (\S+) --out (\S+\.yaml)`", " ".join(out.stdout.split()))
    assert example, out.stdout
    name, out_file = example.groups()
    assert main(["recipe", name, "--out", str(tmp_path / out_file)]) == 0
    assert yaml.safe_load((tmp_path / out_file).read_text())["model"]["class_path"]


def test_a_closed_pipe_ends_quietly():
    read, write = os.pipe()
    os.close(read)  # the reader is gone before zoo writes a byte (`zoo list --json | head -c0`)
    try:
        out = subprocess.run([sys.executable, "-m", "zoo.cli", "list", "--json"], stdout=write, stderr=subprocess.PIPE,
                             text=True)
    finally:
        os.close(write)
    assert out.returncode == 1 and out.stderr == ""


def test_dir_lists_the_lazy_names():
    assert {"load", "publish", "download", "ZooModule", "list_models", "OfflineError"} <= set(dir(zoo))


def test_an_options_dataclass_makes_the_parser(capsys):
    from typing import Literal

    from zoo._cli import ArgumentParser, Commands, Options, arg, option, rest

    ran = []
    group = Commands("demo", "a demo group")

    @group.command("go", "run it")
    class Go(Options):
        src: list[str] = arg("inputs")
        out: str = option(help="where to")
        mode: Literal["fast", "slow"] = option("fast", "how")
        count: int | None = option(None, "how many (default: all)", flag="--n")
        left: str | None = option(help="one side", one_of="side")
        right: str | None = option(help="the other side", one_of="side")
        dry: bool = option(False, "change nothing")
        extra: list[str] = rest()

        def run(self):
            ran.append(self)

    parser = ArgumentParser(prog="zoo")
    sub = parser.add_subparsers(dest="command", required=True)
    group.register_cli(sub, None)
    args, unknown = parser.parse_known_args(["demo", "go", "a", "b", "--out", "o", "--n", "3", "--left", "l", "--x=1"])
    setattr(args, args.rest, unknown)
    args.run(args)
    assert ran == [Go(src=["a", "b"], out="o", mode="fast", count=3, left="l", right=None, dry=False, extra=["--x=1"])]
    for argv, error in ((["--out", "o", "a", "--mode", "slow!"], "invalid choice"), (["a", "--left", "l"], "--out"),
                        (["a", "--out", "o"], "one of the arguments --left --right is required"),
                        (["a", "--out", "o", "--left", "l", "--right", "r"], "not allowed with")):
        with pytest.raises(SystemExit):
            parser.parse_args(["demo", "go", *argv])
        assert error in capsys.readouterr().err
    help_text = " ".join(sub.choices["demo"]._actions[-1].choices["go"].format_help().split())
    assert "--n N how many (default: all)" in help_text and "--mode {fast,slow} how (default: fast)" in help_text
