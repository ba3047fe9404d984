"""The catalog: named models, the methods that build them, and how to find both.

Nothing here imports torch, so ``zoo.list_models()`` and ``zoo info`` stay fast. A method is a subpackage of ``zoo``
(or a distribution exposing a ``zoo.methods`` entry point) whose ``__init__`` calls :func:`register_method` with
*dotted paths* to its heavy parts; they are imported only when used.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import pkgutil
import warnings
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

__all__ = ["FileSpec", "ModelEntry", "MethodSpec", "UnknownModelError", "register_method", "register_model",
           "get_method", "get_entry", "list_models", "info", "resolve_module_class", "import_object", "hub_org",
           "read_pins", "pins_path", "is_hex"]

_HEX = frozenset("0123456789abcdef")


def hub_org() -> str:
    """The Hugging Face org that holds the zoo's repos: ``$ZOO_HF_ORG``, default ``lightning-zoo``."""
    return os.environ.get("ZOO_HF_ORG") or "lightning-zoo"


def is_hex(text: str | None, n: int) -> bool:
    return isinstance(text, str) and len(text) == n and set(text) <= _HEX


class UnknownModelError(KeyError):
    """Raised for a model name that is not in the catalog; the message lists the closest names."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


@dataclass(frozen=True)
class FileSpec:
    """One file, pinned by content: a zoo repo's file (``ModelEntry.files``) by its sha256 and size, an official
    upstream file (``ModelEntry.upstream``) also by its ``url`` (``https://…``, or ``hf://owner/repo[@revision]/path``
    on the Hub), its sha256 and size None where they were never measured (pinned on first use)."""

    path: str  # path inside the repo (or the cache name of an upstream file)
    sha256: str | None
    size: int | None
    url: str | None = None  # only for upstream files


@dataclass(frozen=True)
class ModelEntry:
    """Everything the zoo knows about one named checkpoint (timm's pretrained-config, for the zoo).

    ``files`` pin the zoo repo (config.json, safetensors, card), which lives at ``hub_repo`` on the Hub (at
    ``revision`` when a commit is known) and in the embedded ``hub/<name>`` mirror when present. ``upstream`` lists
    the authors' official files and ``converter`` (``"module:function"``, called as ``converter(files, out_dir,
    entry)``) turns them into a zoo repo: the provenance of a converted repo, and, while ``files`` is empty, what
    the first load downloads and converts. ``architecture`` is display text only.
    """

    name: str
    method: str
    files: tuple[FileSpec, ...] = ()
    repo: str | None = None  # the Hub home, "owner/name"; None: f"{hub_org()}/{name}"
    revision: str | None = None  # a 40-hex Hub commit, only when one is known
    upstream: tuple[FileSpec, ...] = ()
    converter: str | None = None
    convert_args: dict[str, Any] = field(default_factory=dict)
    architecture: dict[str, Any] = field(default_factory=dict)
    license: str = "unknown"
    paper: str = ""
    description: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    recipe: str | None = None
    defaults: dict[str, Any] = field(default_factory=dict)  # task defaults, e.g. sampling settings
    base_model: str | None = None  # for deltas and fine-tunes: the catalog name of the base
    download_size: int | None = None  # bytes of the official files, where the official sources state it

    def __post_init__(self) -> None:
        where = f"model {self.name!r}"
        if not self.files and not self.upstream:
            raise ValueError(f"{where} lists no files: pin its repo's files, or name its upstream files")
        for f in self.files:
            if not is_hex(f.sha256, 64) or not isinstance(f.size, int) or f.url is not None:
                raise ValueError(f"{where}: repo file {f.path!r} needs a 64-hex sha256 and a size (and no url)")
        if self.repo is not None and (self.repo.count("/") != 1 or not all(self.repo.split("/"))):
            raise ValueError(f"{where}: repo must be a Hub repo id 'owner/name', got {self.repo!r}")
        if self.revision is not None and not is_hex(self.revision, 40):
            raise ValueError(f"{where}: revision pins a commit: a 40-hex id, got {self.revision!r}")
        if self.upstream and not self.converter:
            raise ValueError(f"{where}: upstream files need a converter")
        for f in self.upstream:
            if not f.url or not f.url.startswith(("https://", "http://", "hf://", "file://")):
                raise ValueError(f"{where}: upstream file {f.path!r} needs an https://, hf:// or file:// url")
            if f.sha256 is not None and not is_hex(f.sha256, 64):
                raise ValueError(f"{where}: upstream file {f.path!r} has a malformed sha256 {f.sha256!r}")

    @property
    def hub_repo(self) -> str:
        return self.repo or f"{hub_org()}/{self.name}"

    @property
    def released(self) -> bool:
        """Whether the zoo repo is pinned (else it is converted from ``upstream`` on first load)."""
        return bool(self.files)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "files": [asdict(f) for f in self.files],
                "upstream": [asdict(f) for f in self.upstream], "hub_repo": self.hub_repo}


# ----------------------------------------------------------------------------- pins files
def pins_path(package: str) -> Path:
    """``pins.json`` beside a catalog package (``zoo release`` writes it; the catalog reads it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package!r} is not a package")
    return Path(next(iter(spec.submodule_search_locations))) / "pins.json"


def read_pins(package: str) -> dict[str, dict[str, Any]]:
    """The pins of a catalog package: ``{name: {"files": (FileSpec, ...), "revision": str | None}}``."""
    path = pins_path(package)
    if not path.exists():
        return {}
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {name: {"files": tuple(FileSpec(f["path"], f["sha256"], f["size"]) for f in pin["files"]),
                   "revision": pin.get("revision")} for name, pin in raw.items()}


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
    return pkgutil.resolve_name(path)


def register_method(name: str, *, modules: dict[str, str], catalog: str | None = None, cli: str | None = None,
                    paper: str = "") -> MethodSpec:
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
    """Import every method package once: ``zoo.<sub>`` subpackages and ``zoo.methods`` entry points. A built-in
    method that fails to import is a bug and raises; a plugin that fails only warns, not taking the zoo down."""
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
    if name not in methods():
        raise KeyError(f"unknown method {name!r}; known methods: {', '.join(sorted(_METHODS)) or 'none'}")
    return _METHODS[name]


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


def get_entry(name: str) -> ModelEntry:
    discover()
    try:
        return _ENTRIES[name]
    except KeyError:
        from zoo.hparams import closest  # only when a name is wrong: import zoo stays lean

        close = closest(name, sorted(_ENTRIES), n=5)
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
    return get_entry(name).to_dict()


def cli_hooks() -> dict[str, Callable]:
    discover()
    return {name: import_object(s.cli) for name, s in sorted(_METHODS.items()) if s.cli}
