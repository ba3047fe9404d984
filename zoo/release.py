"""``zoo release``: publish every catalog model to its Hub home and write the resulting pins back.

For each entry the repo folder comes from the embedded mirror (``hub/<name>``), from the official files converted
by the method's converter (only when already on this machine), or from its current Hub home. It is uploaded to
``hf://<hub_repo>`` with its model card; the commit and every file's pin go into the method's ``pins.json``, for
review as a diff.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from zoo._download import fetch_upstream, upstream_on_disk
from zoo._verify import file_pins
from zoo.io import write_json_atomic
from zoo.errors import OfflineError, ZooError
from zoo.hub import fetch, upload_folder, where
from zoo.registry import ModelEntry, get_entry, get_method, list_models, pins_path
from zoo.settings import downloads_dir

__all__ = ["plan", "release", "pins_entry", "write_pins"]


def _action(entry: ModelEntry) -> str:
    if where(entry) == "embedded":
        return "upload the embedded mirror"
    if entry.released:
        return "download from its Hub home, then upload"
    if upstream_on_disk(entry):  # release never starts multi-GB downloads by itself
        return "convert the official files, then upload"
    if all(f.url.startswith("hf://") for f in entry.upstream):
        return f"skip: official files not on this machine (`zoo download {entry.name}` puts them in the HF cache)"
    return (f"skip: official files not on this machine (`zoo download {entry.name}`, or place them in "
            f"{downloads_dir(entry.name)})")


def plan(names: list[str] | None = None) -> list[dict[str, Any]]:
    """What a release would do, per entry: its Hub home, current pins and action (no network, no writes)."""
    rows = []
    for name in names or list_models():
        entry = get_entry(name)
        rows.append({"name": name, "hub_repo": entry.hub_repo, "revision": entry.revision, "action": _action(entry),
                     "files": {f.path: {"sha256": f.sha256, "size": f.size} for f in entry.files},
                     "upstream": [f.url for f in entry.upstream]})
    return rows


def _card_fields(entry: ModelEntry) -> dict[str, Any]:
    metrics = [{"name": k, "value": v} for k, v in entry.metrics.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {"name": entry.name, "description": entry.description, "paper": entry.paper, "metrics": metrics,
            "recipe": entry.recipe or "", "license": _hub_license(entry.license), "base_model": entry.base_model}


def _hub_license(text: str) -> str:
    """The Hub's license id for a catalog license text (the Hub accepts ids only)."""
    return next((hub_id for hub_id in ("apache-2.0", "cc-by-4.0", "mit") if text.lower().startswith(hub_id)), "other")


def _converted_folder(entry: ModelEntry, staging: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The official files converted into a zoo repo, with a model card rendered from the catalog entry, and the pins
    of its files."""
    from zoo import load
    from zoo.card import render_card

    folder = staging / entry.name
    shutil.copytree(fetch_upstream(entry), folder)
    files = file_pins(folder)
    (folder / "README.md").write_text(render_card(load(folder), files, _card_fields(entry)), encoding="utf-8")
    return folder, {**files, **file_pins(folder, ["README.md"])}


def pins_entry(folder: Path, revision: str | None, files: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A ``pins.json`` entry for the repo ``folder`` at the Hub commit ``revision``: every file's sha256 and size
    (``files``, when measured already)."""
    files = files if files is not None else file_pins(folder)
    return {"revision": revision, "files": [{"path": path, **pin} for path, pin in files.items()]}


def write_pins(pins: dict[str, dict[str, Any]], out: Path | None = None) -> list[Path]:
    """Merge ``{name: {"revision", "files"}}`` into each method's ``pins.json`` (or into the one file ``out``)."""
    targets: dict[Path, dict[str, Any]] = {}
    for name, pin in pins.items():
        if out is not None:
            path = Path(out)
        else:
            catalog = get_method(get_entry(name).method).catalog
            if catalog is None:
                raise ZooError(f"{name}: its method has no catalog module to write pins beside; pass --pins-out")
            path = pins_path(catalog.rpartition(".")[0])
        if path not in targets:
            targets[path] = json.loads(path.read_text()) if path.exists() else {}
        targets[path][name] = pin
    for path, data in targets.items():
        write_json_atomic(path, data)
    return sorted(targets)


def release(names: list[str] | None = None, *, endpoint: str | None = None, token: str | None = None,
            pins_out: Path | None = None, message: str | None = None, progress=print) -> dict[str, Any]:
    """Publish each entry to ``hf://<hub_repo>``; returns ``{"released": {name: pin}, "skipped": {name: why}}``
    and writes the pins (see :func:`write_pins`)."""
    released: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="zoo-release-") as tmp:
        for name in names or list_models():
            entry = get_entry(name)
            action = _action(entry)
            if action.startswith("skip"):
                skipped[name] = action
                progress(f"{name}: {action}")
                continue
            try:
                # a fetched repo's files were checked and are remembered: pinning them hashes nothing
                folder, files = _converted_folder(entry, Path(tmp)) if not entry.released else (fetch(entry), None)
            except OfflineError as err:
                skipped[name] = f"skip: {err}"
                progress(f"{name}: skip: {err}")
                continue
            commit = upload_folder(folder, entry.hub_repo, message=message or f"zoo release of {name}",
                                   endpoint=endpoint, token=token)
            released[name] = pins_entry(folder, commit, files)
            progress(f"{name}: hf://{entry.hub_repo}@{commit} ({len(released[name]['files'])} files)")
    written = write_pins(released, pins_out) if released else []
    return {"released": released, "skipped": skipped, "pins_files": [str(p) for p in written]}
