"""The zoo's one way to import Lightning: without the optional packages torchmetrics would drag in.

``import lightning`` imports torchmetrics, whose ``__init__`` eagerly imports every metric family whose optional
package is installed: transformers, torchvision, matplotlib (``Metric.plot``) and scipy.signal. On two cores that is
~6 s of an ~8 s ``import lightning``, for nothing ``zoo.load`` needs (the zoo's modules import those packages
themselves where they use them).

So while the first ``import lightning`` of a process runs, the availability probes of Lightning and torchmetrics see
:data:`DEFERRED` as absent, and keep seeing them so for the rest of the process: torchmetrics' BERTScore, CLIPScore,
LPIPS, detection IoUs, ``.plot()`` and the learning-rate-finder plot report their package as missing. The packages
themselves import normally afterwards. Nothing is hidden when Lightning or torchmetrics is already imported (import
either before the zoo to keep every metric) or when ``ZOO_LEAN_IMPORT=0``.

Lightning also imports ``torch._dynamo`` (~2.5 s) for two ``@torch.compiler.disable`` decorators and
``isinstance(x, OptimizedModule)`` checks, needless until something compiles. During the import Lightning sees a
stand-in (:class:`_DynamoStandIn`), and the first real ``import torch._dynamo`` applies the real decorators and
classes (:func:`_defer_dynamo`). The stand-in is used only with the releases it is tested on
(:data:`DYNAMO_STAND_IN_TESTED`); with others Lightning imports ``torch._dynamo`` itself.

Every ``import lightning`` of the zoo is this module's (tests/core/test_lean_import.py checks), so start-up does not
depend on which zoo module a process imports first.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path

__all__ = ["DEFERRED", "DYNAMO_STAND_IN_TESTED", "L", "hidden_during_import", "installed_in",
           "ModelCheckpoint", "PossibleUserWarning", "SIGTERMException", "WeightAveraging", "rank_zero_info"]

#: Optional packages torchmetrics imports at import time when installed, and that the zoo's core never needs.
DEFERRED = ("transformers", "torchvision", "matplotlib", "scipy")

#: The packages hidden while this process imported Lightning (empty when nothing was hidden).
hidden_during_import: tuple[str, ...] = ()

#: The releases the torch._dynamo stand-in is tested with; with any other, Lightning imports torch._dynamo itself.
DYNAMO_STAND_IN_TESTED = {"lightning": ">=2.6,<2.7", "torch": ">=2.14,<2.15"}


def installed_in(ranges: dict[str, str]) -> bool:
    """Whether each distribution's installed version is in its range (``{"lightning": ">=2.6,<2.7"}``), read from
    its metadata without importing it."""
    from importlib.metadata import version

    from packaging.specifiers import SpecifierSet

    return all(version(name) in SpecifierSet(spec) for name, spec in ranges.items())


def _import_lightning():
    global hidden_during_import
    if "lightning" in sys.modules or "torchmetrics" in sys.modules or os.environ.get("ZOO_LEAN_IMPORT") == "0":
        hidden = ()
    else:  # a package already imported costs nothing more, and hiding it would only switch features off
        hidden = tuple(n for n in DEFERRED if not any(m == n or m.startswith(n + ".") for m in sys.modules))
    if not hidden:
        import lightning

        return lightning
    stand_in = "torch._dynamo" not in sys.modules and installed_in(DYNAMO_STAND_IN_TESTED)
    dynamo = _DynamoStandIn() if stand_in else None

    from lightning_utilities.core.imports import RequirementCache, package_available
    from packaging.requirements import Requirement

    probe = RequirementCache.__bool__

    def absent_if_hidden(cache: RequirementCache) -> bool:
        # torchmetrics' probes are RequirementCache objects tested with bool(); they read package metadata, which
        # sys.modules below cannot hide. Caching False (as a failed check would) keeps later checks consistent
        # with the imports torchmetrics skipped.
        name = Requirement(cache.requirement).name if cache.requirement else cache.module.partition(".")[0]
        if name in hidden:
            cache.available = False
            cache.message = f"{name} was hidden from this probe by zoo (see zoo._lightning; ZOO_LEAN_IMPORT=0)"
            return False
        return probe(cache)

    # None in sys.modules makes `import x` raise ImportError and importlib.util.find_spec(x) return None: that
    # covers lightning_utilities' package_available/compare_version probes. It holds process-wide, so another
    # thread importing one of these packages during these seconds would fail.
    for name in hidden:
        sys.modules[name] = None
    if dynamo:
        sys.modules["torch._dynamo"] = dynamo
    RequirementCache.__bool__ = absent_if_hidden
    try:
        import lightning
    finally:
        RequirementCache.__bool__ = probe
        for name in hidden:
            sys.modules.pop(name, None)
        if dynamo and sys.modules.get("torch._dynamo") is dynamo:
            del sys.modules["torch._dynamo"]
        package_available.cache_clear()  # its answers for the hidden names were cached during the import
    hidden_during_import = hidden
    if dynamo:
        _defer_dynamo(dynamo)
    return lightning


# ----------------------------------------------------------------------------- torch._dynamo, deferred until imported
def _real_dynamo() -> types.ModuleType | None:
    module = sys.modules.get("torch._dynamo")
    return None if module is None or isinstance(module, _DynamoStandIn) else module


class _OptimizedModuleCheck(type):
    # No object is an OptimizedModule before torch._dynamo is imported (torch.compile imports it).
    def __instancecheck__(cls, obj) -> bool:
        real = _real_dynamo()
        return real is not None and isinstance(obj, real.OptimizedModule)

    def __subclasscheck__(cls, subclass) -> bool:
        real = _real_dynamo()
        return real is not None and issubclass(subclass, real.OptimizedModule)


class _DeferredOptimizedModule(metaclass=_OptimizedModuleCheck):
    """Stands for ``torch._dynamo.OptimizedModule`` in Lightning until torch._dynamo is imported."""


class _DynamoStandIn(types.ModuleType):
    """``torch._dynamo`` as Lightning's import sees it: records ``disable`` decorations, answers type checks; any
    other attribute imports the real module on the spot (correct, only slower)."""

    OptimizedModule = _DeferredOptimizedModule

    def __init__(self):
        super().__init__("torch._dynamo")
        self.disabled: list[tuple[Callable, Callable, tuple, dict]] = []  # (stand-in, function, args, kwargs)

    def disable(self, fn=None, *args, **kwargs):
        if fn is None:
            return lambda function: self.disable(function, *args, **kwargs)
        disabled = None

        @functools.wraps(fn)
        def deferred_disable(*call_args, **call_kwargs):
            # Replaced by the real decoration once torch._dynamo is imported (see _defer_dynamo); where it cannot
            # be replaced, it applies the real decoration itself, so the function is never traced.
            nonlocal disabled
            real = _real_dynamo()
            if real is None:
                return fn(*call_args, **call_kwargs)
            disabled = disabled or real.disable(fn, *args, **kwargs)
            return disabled(*call_args, **call_kwargs)

        self.disabled.append((deferred_disable, fn, args, kwargs))
        return deferred_disable

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if sys.modules.get("torch._dynamo") is self:
            del sys.modules["torch._dynamo"]
        import torch._dynamo

        return getattr(torch._dynamo, name)


def _defer_dynamo(stand_in: _DynamoStandIn) -> None:
    """Swap in what Lightning got from the stand-in once the real torch._dynamo exists: now, or at its import."""

    def undefer(real: types.ModuleType) -> None:
        for deferred, fn, args, kwargs in stand_in.disabled:  # a decorated method or function: find its owner
            owner, *path = [sys.modules.get(fn.__module__), *fn.__qualname__.split(".")]
            for part in path[:-1]:
                owner = getattr(owner, part, None)
            if owner is not None and getattr(owner, path[-1], None) is deferred:
                setattr(owner, path[-1], real.disable(fn, *args, **kwargs))
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", {})
            for name, value in list(namespace.items()):
                if value is _DeferredOptimizedModule:
                    namespace[name] = real.OptimizedModule

    real = _real_dynamo()
    if real is not None:
        undefer(real)
    else:
        sys.meta_path.insert(0, _DynamoImportHook(undefer))


class _DynamoImportHook:
    """A meta-path finder that runs ``undefer`` right after the real torch._dynamo has executed, then retires."""

    def __init__(self, undefer):
        self.undefer = undefer

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_undefer(module):
            exec_module(module)
            self.undefer(module)

        spec.loader.exec_module = exec_then_undefer
        return spec


# ----------------------------------------------------------------------------- torch and torchvision: a matched pair
def _check_torchvision() -> None:
    """Refuse a torchvision whose operators cannot load into this torch, as one error saying how to install a
    matched pair. Otherwise it fails as "operator torchvision::nms does not exist" wherever it is first imported
    (inside Lightning, timm, or transformers, which reports a missing class); loading its operator libraries
    directly shows the mismatch in milliseconds."""
    if "torchvision" in sys.modules:
        return
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    import torch

    folder = Path(spec.submodule_search_locations[0])
    for library in sorted({p for suffix in importlib.machinery.EXTENSION_SUFFIXES for p in folder.glob(f"_C*{suffix}")}):
        try:
            torch.ops.load_library(str(library))
        except OSError as err:
            from importlib.metadata import version

            from zoo.errors import InstallError

            torch_version, _, build = version("torch").partition("+")
            index = f" --index-url https://download.pytorch.org/whl/{build}" if build else ""
            raise InstallError(f"torchvision {version('torchvision')} was built for another torch than this torch "
                               f"{version('torch')} (its operators do not load: {str(err).splitlines()[0]}); install "
                               "torch and torchvision as a matched pair, from one index: pip install "
                               f"--force-reinstall torch=={torch_version} torchvision{index}") from None


_check_torchvision()
L = _import_lightning()

# the Lightning names the zoo uses (all imported by `import lightning` already; LightningCLI, which imports
# jsonargparse, in __getattr__ below)
from lightning.pytorch.callbacks import ModelCheckpoint, WeightAveraging  # noqa: E402
from lightning.pytorch.utilities import rank_zero_info  # noqa: E402
from lightning.pytorch.utilities.exceptions import SIGTERMException  # noqa: E402
from lightning.pytorch.utilities.warnings import PossibleUserWarning  # noqa: E402


def __getattr__(name: str):
    if name == "LightningCLI":
        from lightning.pytorch.cli import LightningCLI

        return LightningCLI
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
