"""The zoo's one way to import Lightning: without the optional packages torchmetrics would drag in.

``import lightning`` imports torchmetrics (Lightning probes its version by importing it, and LightningModule
handles its metrics), and torchmetrics' ``__init__`` eagerly imports every metric family whose optional package
is installed: transformers (BERTScore, InfoLM, CLIP), torchvision (image and detection metrics), matplotlib
(``Metric.plot``) and scipy.signal (a compatibility patch). On two cores that is ~6 s of an ~8 s
``import lightning``, for nothing ``zoo.load`` needs: the zoo's modules use plain metrics (MAE, cosine) and
import transformers, torchvision or timm themselves where they use them.

So while the first ``import lightning`` of a process runs, the availability probes of Lightning and torchmetrics
see those packages as absent (:data:`DEFERRED`), which is the only influence the zoo has on other libraries'
imports. They stay absent *to those probes* for the rest of the process: torchmetrics' BERTScore, CLIPScore,
LPIPS, detection IoUs, ``.plot()`` and Lightning's learning-rate-finder plot report their package as missing.
The packages themselves import normally afterwards. Nothing is hidden when Lightning or torchmetrics is already
imported (import either before the zoo to keep every torchmetrics metric) or when ``ZOO_LEAN_IMPORT=0``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["DEFERRED", "L", "hidden_during_import"]

#: Optional packages torchmetrics imports at import time when installed, and that the zoo's core never needs.
DEFERRED = ("transformers", "torchvision", "matplotlib", "scipy")

#: The packages hidden while this process imported Lightning (empty when nothing was hidden).
hidden_during_import: tuple[str, ...] = ()


def _import_lightning():
    global hidden_during_import
    if "lightning" in sys.modules or "torchmetrics" in sys.modules or os.environ.get("ZOO_LEAN_IMPORT") == "0":
        hidden = ()
    else:  # a package already imported costs nothing more, and hiding it would only switch features off
        hidden = tuple(n for n in DEFERRED if not any(m == n or m.startswith(n + ".") for m in sys.modules))
    if not hidden:
        import lightning

        return lightning

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
    RequirementCache.__bool__ = absent_if_hidden
    try:
        import lightning
    finally:
        RequirementCache.__bool__ = probe
        for name in hidden:
            sys.modules.pop(name, None)
        package_available.cache_clear()  # its answers for the hidden names were cached during the import
    hidden_during_import = hidden
    return lightning


L = _import_lightning()
