"""What the ``zoo`` command lines share: a command is an :class:`Options` dataclass whose ``run()`` does the work,
its parser generated from the fields. Every ``zoo`` call imports this, so it imports no torch, and its parsers are
plain argparse (importing jsonargparse alone costs ~75 ms)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import typing
from typing import Any, Callable, Literal

MISSING = dataclasses.MISSING


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default in its help, unless there is none (None, a store_true flag) or the help says it."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """The zoo's parsers (subcommand parsers take their parent's class). ``arguments`` adds the parser's arguments
    when it is first used, so that a ``zoo`` call builds only its own command's options."""

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
class Options:
    """A command's options: fields made with :func:`arg`, :func:`option` and :func:`rest`. A subclass becomes a
    keyword-only dataclass when its command is first used: made at import, ~45 of them cost every call ~15 ms."""

    @classmethod
    def dataclass(cls) -> type:
        """This class as an options dataclass (its bases first)."""
        for klass in reversed(cls.__mro__[:cls.__mro__.index(Options)]):
            if "__dataclass_fields__" not in vars(klass):
                dataclasses.dataclass(klass, kw_only=True)
        return cls


def option(default: Any = MISSING, help: str | None = None, *, flag: str | None = None, nargs: str | None = None,
           metavar: str | None = None, one_of: str | None = None) -> Any:
    """A dataclass field that is the option ``--field-name`` (or ``flag``), typed by the field: a ``bool`` is a flag,
    a ``Literal`` gives the choices, a ``list`` takes ``nargs`` values ("+" unless given). No default: required.
    Options with the same ``one_of`` exclude each other; the group is required if its options have no default."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag, "nargs": nargs,
                                                        "metavar": metavar, "one_of": one_of})


def arg(help: str, default: Any = MISSING) -> Any:
    """A dataclass field that is a positional argument; with a default, it may be left out (a list: given none)."""
    return dataclasses.field(default=default, metadata={"help": help, "positional": True})


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
        kwargs = {"help": meta["help"], "nargs": meta.get("nargs"), "metavar": meta.get("metavar")}
        if typing.get_origin(kind) is list:
            (kind,), kwargs["nargs"] = typing.get_args(kind), kwargs["nargs"] or "+"
        if typing.get_origin(kind) is Literal:
            kind, kwargs["choices"] = str, typing.get_args(kind)
        if kind is bool:
            kwargs.update(action="store_true", nargs=None)
        else:
            kwargs["type"] = kind
        required = field.default is MISSING
        if meta.get("positional"):
            if not required:
                kwargs.update(default=field.default, nargs="*" if kwargs["nargs"] else "?")
            p.add_argument(field.name, **{k: v for k, v in kwargs.items() if v is not None})
            continue
        flag = (flags or {}).get(field.name) or meta["flag"] or "--" + field.name.replace("_", "-")
        if kind is not bool and "choices" not in kwargs:  # named after the option, not the field
            kwargs["metavar"] = kwargs["metavar"] or flag.removeprefix("--").replace("-", "_").upper()
        group = groups.get(meta["one_of"], p)
        group.add_argument(flag, dest=field.name, default=None if required else field.default,
                           required=required and group is p, **{k: v for k, v in kwargs.items() if v is not None})


def from_args(cls: type, args: Any, **values: Any) -> Any:
    """The dataclass ``cls`` from the like-named attributes of ``args``; ``values`` replace them."""
    return cls(**{**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}, **values})


def _add_command(p, cls: type[Options], fields_of: str | None = None, flags: dict[str, str] | None = None) -> None:
    cls = cls.dataclass()
    if fields_of:  # the command's class, extended by the fields of a dataclass from a heavy module
        from zoo.registry import import_object

        config = import_object(fields_of)
        hints = typing.get_type_hints(config)
        cls = dataclasses.make_dataclass(cls.__name__, [
            (f.name, hints[f.name], dataclasses.field(default=f.default, metadata=f.metadata))
            for f in dataclasses.fields(config)], bases=(cls,), kw_only=True)
    add_dataclass_arguments(p, cls, flags)
    p.set_defaults(run=lambda args: from_args(cls, args).run())


class Commands:
    """The commands of ``zoo``, or of a method's ``zoo NAME ...`` (and its ``zoo convert NAME``)."""

    def __init__(self, name: str | None = None, help: str | None = None, metavar: str = "COMMAND"):
        self.name, self.help, self.metavar = name, help, metavar
        self.commands: list[tuple[str | None, str, type, dict]] = []

    def command(self, name: str | None, help: str, **extra) -> Callable[[type], type]:
        """A decorator: the :class:`Options` subclass, whose ``run()`` does the work, is the command ``name`` (None:
        ``zoo convert NAME``). ``fields_of="module:Config"`` adds a dataclass's fields (its module is imported only
        when the command is used), ``flags={field: "--flag"}`` renames options."""
        return lambda cls: self.commands.append((name, help, cls, extra)) or cls

    def register_cli(self, parent, convert) -> None:
        """Add the commands to the subparsers ``parent`` (a method's: as ``zoo NAME ...``, its converter to
        ``convert``); each parser gets its options when first used."""
        sub = parent if self.name is None else parent.add_parser(self.name, help=self.help).add_subparsers(
            dest=f"{self.name}_command", metavar=self.metavar, required=True)
        for name, help, cls, extra in self.commands:
            (sub if name else convert).add_parser(name or self.name, help=help,
                                                  arguments=functools.partial(_add_command, cls=cls, **extra))


# ----------------------------------------------------------------------------- models and output
class ModelOptions(Options):
    """A model to load with :func:`load_model`; subclasses change the fields' help."""

    name: str = arg("catalog name, hf://owner/repo or a local repo folder")
    device: str = option("cpu", "torch device")
    dtype: str | None = option(None, "cast floating weights, e.g. float64 or bfloat16 (default: as stored)")


def load_model(o: Any):
    """``zoo.load`` of the model ``o.name``, with ``o``'s revision, device and dtype where it has them."""
    import zoo

    return zoo.load(o.name, revision=getattr(o, "revision", None), device=getattr(o, "device", None),
                    dtype=getattr(o, "dtype", None))


def table(rows: list[list[str]], header: list[str]) -> str:
    """``rows`` as text columns under ``header``, each as wide as its widest cell."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def print_json(obj: Any, path: str | None = None) -> None:
    """Print ``obj`` as indented JSON and, given ``path``, also write it there (atomically)."""
    text = json.dumps(obj, indent=2)
    if path:
        from zoo.io import write_text_atomic

        write_text_atomic(path, text + "\n")
    print(text)
