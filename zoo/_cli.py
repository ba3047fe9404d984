"""What the ``zoo`` command lines share: parser, model argument, dataclass options, JSON output. Every ``zoo`` call
imports this, so it imports no torch (``zoo --help`` must stay fast)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from typing import Any, Callable


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default in its help, unless there is none (None, a store_true flag) or the help says it."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """The zoo's parsers; subcommand parsers, the methods' included, take their parent's class and so this help.

    ``arguments``: a function that adds the parser's arguments when it first parses (``--help`` included), for a
    command whose options come from a module too heavy to import on every ``zoo`` call.
    """

    def __init__(self, *args, formatter_class=HelpFormatter, arguments: Callable[[Any], None] | None = None, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)
        self._add_arguments = arguments

    def parse_known_args(self, args=None, namespace=None):
        if self._add_arguments is not None:
            add, self._add_arguments = self._add_arguments, None
            add(self)
        return super().parse_known_args(args, namespace)


def add_model_argument(p, help: str = "catalog name, hf://owner/repo or a local repo folder", *, revision: bool = False,
                       device: bool = True, dtype: str | None = "cast floating weights, e.g. float64 or bfloat16 "
                       "(default: as stored)") -> None:
    """The positional ``name`` of a model to load, with ``--revision`` if asked, ``--device`` and ``--dtype``
    (``dtype=None``: no such option); :func:`load_model` loads it."""
    p.add_argument("name", help=help)
    if revision:
        p.add_argument("--revision", help="Hub branch, tag or commit (default: the catalog's pinned commit, or main)")
    if device:
        p.add_argument("--device", default="cpu", help="torch device")
    if dtype:
        p.add_argument("--dtype", help=dtype)


def load_model(args: argparse.Namespace, **kwargs):
    """``zoo.load`` of the model :func:`add_model_argument` named, with the options it added."""
    from zoo.loading import load

    return load(args.name, revision=getattr(args, "revision", None), device=getattr(args, "device", None),
                dtype=getattr(args, "dtype", None), **kwargs)


def print_json(obj: Any, path: str | None = None) -> None:
    """Print ``obj`` as indented JSON and, given ``path``, also write it there (atomically)."""
    text = json.dumps(obj, indent=2)
    if path:
        from zoo.io import write_text_atomic

        write_text_atomic(path, text + "\n")
    print(text)


# ----------------------------------------------------------------------------- dataclasses as options
def option(default: Any, help: str) -> Any:
    """A dataclass field with its command-line help (read by :func:`add_dataclass_arguments`)."""
    return dataclasses.field(default=default, metadata={"help": help})


def add_dataclass_arguments(p, cls: type, flags: dict[str, str] | None = None) -> None:
    """One option per field of the dataclass ``cls``: ``--field-name`` (or ``flags[field]``), typed and defaulted by
    the field, with its :func:`option` help; the parsed value keeps the field's name (see :func:`from_args`)."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if typing.get_args(kind):  # an optional field, `str | None`: parse the value as its type
            kind = next(t for t in typing.get_args(kind) if t is not type(None))
        flag = (flags or {}).get(field.name, "--" + field.name.replace("_", "-"))
        p.add_argument(flag, dest=field.name, metavar=flag.lstrip("-").replace("-", "_").upper(), type=kind,
                       default=field.default, help=field.metadata.get("help"))


def from_args(cls: type, args: argparse.Namespace, **values: Any) -> Any:
    """The dataclass ``cls`` from the options :func:`add_dataclass_arguments` added; ``values`` replace parsed ones."""
    return cls(**{**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}, **values})
