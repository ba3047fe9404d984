"""The catalog: named models, the methods that build them, and how to find both.

Nothing here imports torch, so ``zoo.list_models()`` and ``zoo info`` stay fast. A method is a
subpackage of ``zoo`` (or a distribution exposing a ``zoo.methods`` entry point) whose ``__init__``
calls :func:`register_method` with *dotted paths* to its heavy parts; they are imported only when used.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
import pkgutil
import warnings
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, Callable

__all__ = [
    "FileSpec",
    "ModelEntry",
    "MethodSpec",
    "UnknownModelError",
    "register_method",
    "register_model",
    "get_method",
    "get_entry",
    "list_models",
    "info",
    "resolve_module_class",
    "import_object",
]

SOURCES = ("embedded", "hf", "upstream")


class UnknownModelError(KeyError):
    """Raised for a model name that is not in the catalog; the message lists the closest names."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


@dataclass(frozen=True)
class FileSpec:
    """One file of a model repo, pinned by content."""

    path: str  # path inside the repo (or the cache name of an upstream file)
    sha256: str | None  # None only for upstream files whose hash could not be measured: pinned on first use
    size: int | None
    url: str | None = None  # only for upstream files


@dataclass(frozen=True)
class ModelEntry:
    """Everything the zoo knows about one named checkpoint (timm's pretrained-config, for the zoo).

    ``source`` says where the files live:
      * ``"embedded"``: ``repo`` is a folder of the embedded ``hub/``;
      * ``"hf"``: ``repo`` is a Hugging Face repo id pinned at the 40-hex ``revision``;
      * ``"upstream"``: the files carry official ``url``s and ``converter`` (a ``"module:function"`` path,
        called as ``converter(files: dict[str, Path], out_dir: Path, entry)``) turns them into a zoo repo.
    """

    name: str
    method: str
    source: str
    repo: str
    files: tuple[FileSpec, ...]
    architecture: dict[str, Any] = field(default_factory=dict)
    revision: str | None = None
    converter: str | None = None
    license: str = "unknown"
    paper: str = ""
    description: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    recipe: str | None = None
    defaults: dict[str, Any] = field(default_factory=dict)  # task defaults, e.g. sampling settings
    base_model: str | None = None  # for deltas and fine-tunes: the catalog name of the base

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"model {self.name!r}: source must be one of {SOURCES}, got {self.source!r}")
        if self.source == "hf" and not (
            self.revision and len(self.revision) == 40 and all(c in "0123456789abcdef" for c in self.revision)
        ):
            raise ValueError(f"model {self.name!r}: a Hugging Face source needs a pinned 40-hex revision")
        if self.source == "upstream" and (not self.converter or any(f.url is None for f in self.files)):
            raise ValueError(f"model {self.name!r}: an upstream source needs a converter and a url per file")
        for f in self.files:
            if f.sha256 is None and self.source == "upstream":
                continue
            if f.sha256 is None or len(f.sha256) != 64:
                raise ValueError(f"model {self.name!r}: file {f.path!r} needs a 64-hex sha256")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["files"] = [asdict(f) for f in self.files]
        return d


@dataclass(frozen=True)
class MethodSpec:
    """A method's entry points, as dotted ``"module:attr"`` paths imported on first use."""

    name: str
    modules: dict[str, str]  # model_type -> "module:Class" (ZooModule subclasses)
    catalog: str | None = None  # module with a list ``ENTRIES`` of ModelEntry
    cli: str | None = None  # "module:function(commands, convert)": adds `zoo <method> …` / `zoo convert <method>`
    paper: str = ""


_METHODS: dict[str, MethodSpec] = {}
_ENTRIES: dict[str, ModelEntry] = {}
_discovered = False


def import_object(path: str) -> Any:
    """Import ``"package.module:attr"``."""
    module_name, _, attr = path.partition(":")
    obj = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def register_method(
    name: str,
    *,
    modules: dict[str, str],
    catalog: str | None = None,
    cli: str | None = None,
    paper: str = "",
) -> MethodSpec:
    """Called by a method package's ``__init__``; registering the same spec twice is a no-op."""
    spec = MethodSpec(name, dict(modules), catalog, cli, paper)
    if name in _METHODS and _METHODS[name] != spec:
        raise ValueError(f"method {name!r} is already registered with a different spec")
    _METHODS[name] = spec
    if catalog:
        for entry in import_object(catalog + ":ENTRIES"):
            register_model(entry)
    return spec


def register_model(entry: ModelEntry) -> ModelEntry:
    """Add a named model to the catalog. Names are stable: re-registering a name must not change it."""
    old = _ENTRIES.get(entry.name)
    if old is not None and old != entry:
        raise ValueError(f"model name {entry.name!r} is already registered with different contents")
    _ENTRIES[entry.name] = entry
    return entry


def discover() -> None:
    """Import every method package once: ``zoo.<sub>`` subpackages and ``zoo.methods`` entry points.

    A built-in method that fails to import is a bug and raises; a third-party plugin that fails only warns,
    so one broken plugin cannot take the whole zoo down.
    """
    global _discovered
    if _discovered:
        return
    import zoo

    for mod in pkgutil.iter_modules(zoo.__path__):
        if mod.ispkg and not mod.name.startswith("_"):
            importlib.import_module(f"zoo.{mod.name}")
    for ep in metadata.entry_points(group="zoo.methods"):
        try:
            importlib.import_module(ep.value)
        except Exception as err:  # noqa: BLE001
            warnings.warn(f"zoo plugin {ep.name!r} ({ep.value}) failed to import and is skipped: {err}")
    _discovered = True


def get_method(name: str) -> MethodSpec:
    discover()
    try:
        return _METHODS[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; known methods: {', '.join(sorted(_METHODS)) or 'none'}") from None


def methods() -> dict[str, MethodSpec]:
    discover()
    return dict(_METHODS)


def resolve_module_class(model_type: str) -> type:
    """The ZooModule subclass registered under ``model_type`` by any method."""
    discover()
    for spec in _METHODS.values():
        if model_type in spec.modules:
            return import_object(spec.modules[model_type])
    known = sorted(t for s in _METHODS.values() for t in s.modules)
    raise KeyError(f"no method registers model_type {model_type!r}; known: {', '.join(known)}")


def _closest(name: str, candidates: list[str], n: int = 5) -> list[str]:
    close = difflib.get_close_matches(name, candidates, n=n, cutoff=0.4)
    close += [c for c in candidates if name.lower() in c.lower() and c not in close]
    return close[:n]


def get_entry(name: str) -> ModelEntry:
    discover()
    try:
        return _ENTRIES[name]
    except KeyError:
        close = _closest(name, sorted(_ENTRIES))
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownModelError(
            f"unknown model {name!r}.{hint} Run `zoo list` (or zoo.list_models()) to see every name."
        ) from None


def list_models(pattern: str | None = None, method: str | None = None) -> list[str]:
    """Sorted catalog names, filtered by a shell-style ``pattern`` and/or ``method``."""
    discover()
    names = sorted(_ENTRIES)
    if method is not None:
        get_method(method)
        names = [n for n in names if _ENTRIES[n].method == method]
    if pattern is not None:
        names = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    return names


def info(name: str) -> dict[str, Any]:
    """The catalog entry of ``name`` as a plain dict."""
    return get_entry(name).to_dict()


def cli_hooks() -> dict[str, Callable]:
    discover()
    return {name: import_object(s.cli) for name, s in sorted(_METHODS.items()) if s.cli}
