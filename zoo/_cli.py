"""What the ``zoo`` command lines share: commands as data and JSON output. A command is an options dataclass
(:func:`options`, fields made with :func:`arg` and :func:`option`) plus the function that takes it, added by
:func:`command`, which generates its parser. Every ``zoo`` call imports this, so it imports no torch (``zoo --help``
must stay fast); for that reason too the parsers are plain argparse: importing jsonargparse costs ~75 ms."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from typing import Any, Callable, Literal

MISSING = dataclasses.MISSING
options = dataclasses.dataclass(kw_only=True)  # an options dataclass: any field order, required ones included


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default in its help, unless there is none (None, a store_true flag) or the help says it."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """The zoo's parsers; subcommand parsers, the methods' included, take their parent's class and so this help.

    ``arguments``: a function that adds the parser's arguments when it is first used (to parse or to show help), so
    that a ``zoo`` call builds only its own command's options (and a heavy module's options cost nothing elsewhere).
    """

    def __init__(self, *args, formatter_class=HelpFormatter, arguments: Callable[[Any], None] | None = None, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)
        self._add_arguments = arguments

    def _complete(self) -> None:
        if self._add_arguments is not None:
            add, self._add_arguments = self._add_arguments, None
            add(self)

    def parse_known_args(self, args=None, namespace=None):
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_help(self):
        self._complete()
        return super().format_help()


# ----------------------------------------------------------------------------- dataclasses as commands
def option(default: Any = MISSING, help: str | None = None, *, flag: str | None = None, nargs: str | None = None,
           metavar: str | None = None, one_of: str | None = None) -> Any:
    """A dataclass field that is the option ``--field-name`` (or ``flag``), typed by the field: a ``bool`` is a flag,
    a ``Literal`` gives the choices, a ``list`` takes ``nargs`` values ("+" unless given). No default: required.
    Options with the same ``one_of`` exclude each other; the group is required if its options have no default."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag, "nargs": nargs,
                                                        "metavar": metavar, "one_of": one_of})


def arg(help: str, default: Any = MISSING, *, nargs: str | None = None) -> Any:
    """A dataclass field that is a positional argument; with a default, it may be left out."""
    return dataclasses.field(default=default, metadata={"help": help, "nargs": nargs, "positional": True})


def rest() -> Any:
    """A ``list[str]`` field of the arguments no option takes (``zoo train``'s ``--a.b=c`` recipe overrides)."""
    return dataclasses.field(default_factory=list, metadata={"rest": True})


def add_dataclass_arguments(p, cls: type, flags: dict[str, str] | None = None) -> None:
    """One argument per field of the options dataclass ``cls`` (see :func:`option`, :func:`arg`, :func:`rest`),
    ``flags[field]`` renaming an option; the parsed value keeps the field's name (see :func:`from_args`)."""
    hints, fields = typing.get_type_hints(cls), dataclasses.fields(cls)
    groups = {}
    for name in {f.metadata.get("one_of") for f in fields} - {None}:
        required = all(f.default is MISSING for f in fields if f.metadata.get("one_of") == name)
        groups[name] = p.add_mutually_exclusive_group(required=required)
    for field in fields:
        meta, kind = field.metadata, hints[field.name]
        if meta.get("rest"):
            p.set_defaults(rest=field.name)
            continue
        if type(None) in typing.get_args(kind):  # an optional field, `str | None`: parse the value as its type
            kind = next(t for t in typing.get_args(kind) if t is not type(None))
        kwargs = {"help": meta["help"], "nargs": meta["nargs"], "metavar": meta.get("metavar")}
        if typing.get_origin(kind) is list:
            (kind,), kwargs["nargs"] = typing.get_args(kind), meta["nargs"] or "+"
        if typing.get_origin(kind) is Literal:
            kind, kwargs["choices"] = str, typing.get_args(kind)
        kwargs.update(action="store_true", nargs=None) if kind is bool else kwargs.update(type=kind)
        required = field.default is MISSING
        if meta.get("positional"):
            if not required:
                kwargs.update(default=field.default, nargs=kwargs["nargs"] or "?")
            p.add_argument(field.name, **{k: v for k, v in kwargs.items() if v is not None})
            continue
        flag = (flags or {}).get(field.name) or meta["flag"]
        if flag and kind is not bool:  # the metavar names the option, not the field
            kwargs["metavar"] = meta["metavar"] or flag.lstrip("-").replace("-", "_").upper()
        flag = flag or "--" + field.name.replace("_", "-")
        group = groups.get(meta["one_of"], p)
        group.add_argument(flag, dest=field.name, default=None if required else field.default,
                           required=required and group is p, **{k: v for k, v in kwargs.items() if v is not None})


def from_args(cls: type, args: Any, **values: Any) -> Any:
    """The dataclass ``cls`` from the like-named attributes of ``args``; ``values`` replace them."""
    return cls(**{**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}, **values})


def command(sub, name: str, run: Callable[[Any], None], help: str, cls: type | Callable[[], type] | None = None,
            flags: dict[str, str] | None = None) -> None:
    """Add the command ``name`` to the subparsers ``sub``: ``run`` takes its options, the dataclass its first
    parameter is annotated with, or ``cls`` (a function returning the class: one from a module too heavy to import
    on every ``zoo`` call). The options are added when the parser is first used."""

    def add(p) -> None:
        kind = next(iter(typing.get_type_hints(run).values())) if cls is None else cls
        kind = kind if isinstance(kind, type) else kind()
        add_dataclass_arguments(p, kind, flags)
        p.set_defaults(run=lambda args: run(from_args(kind, args)))

    sub.add_parser(name, help=help, arguments=add)


def commands(parent, name: str, help: str, metavar: str = "COMMAND"):
    """The subparsers of the command group ``name`` (``zoo chess ...``), to :func:`command` into."""
    return parent.add_parser(name, help=help).add_subparsers(dest=f"{name}_command", metavar=metavar, required=True)


# ----------------------------------------------------------------------------- models and output
@options
class ModelOptions:
    """A model to load with :func:`load_model`; subclasses change the fields' help."""

    name: str = arg("catalog name, hf://owner/repo or a local repo folder")
    device: str = option("cpu", "torch device")
    dtype: str | None = option(None, "cast floating weights, e.g. float64 or bfloat16 (default: as stored)")


def load_model(o: Any, **kwargs):
    """``zoo.load`` of the model ``o.name``, with ``o``'s revision, device and dtype where it has them."""
    import zoo

    return zoo.load(o.name, revision=getattr(o, "revision", None), device=getattr(o, "device", None),
                    dtype=getattr(o, "dtype", None), **kwargs)


def print_json(obj: Any, path: str | None = None) -> None:
    """Print ``obj`` as indented JSON and, given ``path``, also write it there (atomically)."""
    text = json.dumps(obj, indent=2)
    if path:
        from zoo.io import write_text_atomic

        write_text_atomic(path, text + "\n")
    print(text)
