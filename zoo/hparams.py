"""Checking hyperparameters against what a constructor accepts: unknown keys (with the closest valid names) and
values of the wrong type, read from the signature's and the config dataclasses' annotations. Every method's configs go
through here, so a typo in config.json or a recipe gives one message naming the key. Torch-free.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import inspect
import sys
import types
import typing
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Literal, Union, get_args, get_origin

from zoo.errors import ConfigError

__all__ = ["check_arguments", "check_value", "dataclass_from_dict", "closest", "reading_saved_config", "type_name"]

# True while zoo.load builds a module from a saved config.json: its values were written with their real types,
# so text where a number belongs is damage and is not read as a command-line override
_SAVED = ContextVar("zoo_reading_saved_config", default=False)


@contextmanager
def reading_saved_config() -> Iterator[None]:
    token = _SAVED.set(True)
    try:
        yield
    finally:
        _SAVED.reset(token)


def closest(name: str, candidates: list[str], n: int = 3) -> list[str]:
    """A typo's likely fixes, for a "did you mean": the closest spellings first, then the names holding ``name``
    (``chess-small-av`` for ``chess``), at most ``n``."""
    close = difflib.get_close_matches(name, candidates, n=n)
    close += [c for c in candidates if name and name.lower() in c.lower() and c not in close]
    return close[:n]


def type_name(kind: Any) -> str:
    if kind is type(None):
        return "None"
    if isinstance(kind, type) and not get_args(kind):
        return kind.__name__
    return str(kind).replace("typing.", "").replace("NoneType", "None")


def _fits(value: Any, kind: Any) -> bool:
    """Whether a JSON value fits an annotation: classes by isinstance, containers element by element; typing
    constructs it does not know (a TypeVar, Callable, ...) are not checked."""
    if kind is Any or kind is object:
        return True
    origin, args = get_origin(kind), get_args(kind)
    if origin is Union or origin is types.UnionType:
        return any(_fits(value, a) for a in args)
    if kind is None or kind is type(None):
        return value is None
    if origin is Literal:
        return value in args
    if kind is bool:
        return isinstance(value, bool)
    if kind in (int, float):  # bool is an int to Python, never to a config; an int is a fine float
        return isinstance(value, int if kind is int else (int, float)) and not isinstance(value, bool)
    if kind in (list, tuple) or origin in (list, tuple, collections.abc.Sequence):
        if not isinstance(value, (list, tuple)):  # JSON has no tuples
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args))
        return not args or all(_fits(v, args[0]) for v in value)
    if kind is dict or origin in (dict, collections.abc.Mapping):
        return isinstance(value, dict) and (not args or all(_fits(k, args[0]) and _fits(v, args[1])
                                                            for k, v in value.items()))
    if dataclasses.is_dataclass(kind):
        return isinstance(value, (dict, kind))
    if isinstance(kind, type):
        return isinstance(value, kind)
    return True


def _read_text(value: str, kind: Any) -> Any:
    """A command-line override of one config entry arrives as text: read it as a number or YAML."""
    import yaml

    try:
        return float(value) if kind is float else yaml.safe_load(value)  # float(): YAML reads "1e-4" as text
    except (ValueError, yaml.YAMLError):
        return value  # reported by the caller, as the text it was


def check_value(value: Any, kind: Any, where: str) -> Any:
    """``value`` if it fits ``kind`` (text read as YAML first, except in a saved config), else a ConfigError."""
    if isinstance(value, str) and not _fits(value, kind) and not _SAVED.get():
        value = _read_text(value, kind)
    if not _fits(value, kind):
        raise ConfigError(f"{where} must be {type_name(kind)}, got {value!r}")
    return float(value) if kind is float else value


def _hints(fn: Callable) -> dict[str, Any]:
    """The resolvable annotations of ``fn`` (names only imported for type checkers are left unchecked)."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001  (one unresolvable name must not lose the others)
        module = sys.modules.get(getattr(fn, "__module__", ""))
        namespace = getattr(fn, "__globals__", None) or (vars(module) if module else {})
        hints = {}
        for name, annotation in getattr(fn, "__annotations__", {}).items():
            with suppress(Exception):
                hints[name] = typing.get_type_hints(types.SimpleNamespace(__annotations__={name: annotation}),
                                                    globalns=namespace)[name]
        return hints


def _check_keys(values: dict[str, Any], known: list[str] | None, required: list[str], where: str, what: str | None,
                owner: Any) -> None:
    """Unknown keys (with the closest valid names; unchecked when ``known`` is None) or missing ones: a ConfigError."""
    unknown = sorted(set(values) - set(known)) if known is not None else []
    if unknown:
        hints = [f"{key!r}: did you mean {' or '.join(map(repr, close))}?" for key in unknown
                 if (close := closest(key, known))]
        raise ConfigError(f"unknown {what or where} options {unknown}" + (f" ({'; '.join(hints)})" if hints else "")
                          + f"; valid options: {', '.join(known)}")
    if missing := [name for name in required if name not in values]:
        raise ConfigError(f"{where} lacks {', '.join(missing)} (required by {owner})")


def check_arguments(fn: Callable, values: dict[str, Any], where: str, what: str | None = None) -> None:
    """Check ``values`` as keyword arguments of ``fn`` (a function or a class): unknown or missing keys, types.

    ``where`` prefixes the key in messages (``hparams`` gives ``hparams.num_heads``); ``what`` names the options
    (default: ``where``).
    """
    init = fn.__init__ if isinstance(fn, type) else fn
    params = [p for name, p in inspect.signature(init).parameters.items() if name != "self"]
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    known = None if any(p.kind is p.VAR_KEYWORD for p in params) else [p.name for p in named]
    _check_keys(values, known, [p.name for p in named if p.default is p.empty], where, what,
                getattr(fn, "__qualname__", fn))
    hints = _hints(init)
    for key, value in values.items():
        if key in hints:
            check_value(value, hints[key], f"{where}.{key}")


def dataclass_from_dict(cls: type, values: dict[str, Any] | None, where: str, what: str | None = None):
    """Build the config dataclass ``cls`` from a plain dict: unknown keys (with the closest valid names) and values
    of the wrong type are a ConfigError, and so is a value the dataclass itself rejects (``__post_init__``)."""
    values = dict(values or {})
    fields = [f for f in dataclasses.fields(cls) if f.init]
    _check_keys(values, sorted(f.name for f in fields), [f.name for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING], where, what, cls.__name__)
    hints = _hints(cls)
    kwargs = {k: check_value(v, hints[k], f"{where}.{k}") if k in hints else v for k, v in values.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None
