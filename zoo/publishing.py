"""Publishing: a model (or a Lightning checkpoint of one) → a Hub-shaped repo in a folder or on the Hub.

A repo is ``config.json``, ``model.safetensors`` (or shards + index) and ``README.md``, a model card
rendered from ``MODEL_CARD_TEMPLATE.md`` with Hub metadata. The returned dict (and the CLI's output) holds
the commit and each file's sha256 and size: exactly what a catalog entry pins.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from zoo._io import CONFIG_NAME, DEFAULT_SHARD_BYTES, atomic_path, sha256_file
from zoo.card import check_card, load_card
from zoo.module import ZooModule, _SkipInit, constructor_args
from zoo.registry import resolve_module_class

__all__ = ["publish", "render_card", "module_from_checkpoint", "TEMPLATE_PATH"]

TEMPLATE_PATH = Path(__file__).resolve().parent / "MODEL_CARD_TEMPLATE.md"  # package data; top-level link for readers
HUB_PREFIX = "hf://"


def module_from_checkpoint(path: str | os.PathLike) -> ZooModule:
    """Rebuild a ZooModule from a Lightning ``.ckpt`` without unpickling code (``weights_only=True``).

    The result holds what ``save_pretrained`` would write after ``fit``: a module class that keeps more than its
    state dict in a checkpoint (EScAIP's EMA of the weights) defines ``weights_from_checkpoint_(checkpoint)``,
    called after the state dict is assigned.
    """
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    model_type = ckpt.get("zoo_model_type")
    if model_type is None:
        raise ValueError(f"{path} was not written by a ZooModule (no 'zoo_model_type' in the checkpoint)")
    cls = resolve_module_class(model_type)
    with torch.device("meta"), _SkipInit():
        model = cls(**constructor_args(ckpt.get("hyper_parameters", {})))
    model.load_weights_(ckpt["state_dict"])
    finish = getattr(model, "weights_from_checkpoint_", None)
    if finish is not None:
        finish(ckpt)
    return model.eval()


def render_card(model: ZooModule, files: dict[str, dict[str, Any]], card: dict[str, Any] | None = None,
                config: dict[str, Any] | None = None) -> str:
    """The model card: Hub YAML metadata (library, license, tags, datasets, base model, model-index) + body.

    ``config``: the hparams the card shows (default ``model.config``); publishing passes the written config.json's.
    """
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    fields = {**model.model_card_fields(), **(card or {})}
    name = fields.get("name") or model.model_type
    metrics = fields.get("metrics", [])
    eval_results = [
        EvalResult(
            task_type=m.get("task", "other"),
            dataset_type=m.get("dataset", "custom"),
            dataset_name=m.get("dataset_name", m.get("dataset", "custom")),
            dataset_split=m.get("split"),
            metric_type=m["name"],
            metric_name=m.get("display", m["name"]),
            metric_value=m["value"],
        )
        for m in metrics
    ]
    data = ModelCardData(
        library_name="zoo",
        license=fields.get("license", "apache-2.0"),
        tags=sorted(set(fields.get("tags", []))),
        datasets=fields.get("datasets") or None,
        base_model=fields.get("base_model"),
        model_name=name,
        eval_results=eval_results or None,
    )
    if not TEMPLATE_PATH.exists():
        raise FileNotFoundError(f"the model card template {TEMPLATE_PATH} is missing from this installation")
    rendered = ModelCard.from_template(
        data,
        template_path=str(TEMPLATE_PATH),
        name=name,
        method=model.method,
        model_type=model.model_type,
        description=fields.get("description", ""),
        paper=fields.get("paper", ""),
        usage=fields.get("usage") or f'import zoo\nmodel = zoo.load("{name}")',
        metrics=metrics,
        recipe=fields.get("recipe", ""),
        training=fields.get("training", ""),
        limitations=fields.get("limitations", ""),
        citation=fields.get("citation", ""),
        config=model.config if config is None else config,
        files=files,
    )
    return str(rendered)


def _write_repo(model: ZooModule, folder: Path, card: dict | None, max_shard_bytes: int) -> dict[str, dict]:
    names = model.save_pretrained(folder, max_shard_bytes=max_shard_bytes)
    files = {n: {"sha256": sha256_file(folder / n), "size": (folder / n).stat().st_size} for n in names}
    # the card shows what was written, not the in-memory module (a delta loads merged, stores bf16 tensors, ...)
    written = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))["hparams"]
    with atomic_path(folder / "README.md") as tmp:
        tmp.write_text(render_card(model, files, card, config=written), encoding="utf-8")
    files["README.md"] = {"sha256": sha256_file(folder / "README.md"), "size": (folder / "README.md").stat().st_size}
    return files


def publish(
    model: ZooModule | str | os.PathLike,
    repo: str | os.PathLike,
    *,
    card: dict[str, Any] | str | os.PathLike | None = None,
    max_shard_bytes: int = DEFAULT_SHARD_BYTES,
    endpoint: str | None = None,
    token: str | None = None,
    private: bool = False,
    commit_message: str | None = None,
) -> dict[str, Any]:
    """Write ``model`` as a repo into the folder ``repo``, or upload it to the Hub if ``repo`` is ``hf://owner/name``.

    ``model`` may be a ZooModule or the path of a Lightning checkpoint of one. ``card``: model card fields, as a
    dict or the path of a YAML/JSON file (the format: :mod:`zoo.card`); it is checked before anything is
    written, and a bad card is a ``zoo.errors.CardError``. Returns ``{"repo", "commit", "files": {name: {"sha256",
    "size"}}}``; ``commit`` is None for a folder.
    """
    if card is not None:
        card = check_card(card) if isinstance(card, dict) else load_card(card)
    if not isinstance(model, ZooModule):
        model = module_from_checkpoint(model)
    target = str(repo)
    if not target.startswith(HUB_PREFIX):
        folder = Path(target)
        files = _write_repo(model, folder, card, max_shard_bytes)
        return {"repo": str(folder), "commit": None, "files": files}

    from huggingface_hub import HfApi

    from zoo.hub import hf_endpoint, hub_errors

    repo_id = target[len(HUB_PREFIX):]
    api = HfApi(endpoint=endpoint or hf_endpoint(), token=token)
    with tempfile.TemporaryDirectory(prefix="zoo-publish-") as tmp:
        files = _write_repo(model, Path(tmp), card, max_shard_bytes)
        with hub_errors(repo_id, upload=True):
            api.create_repo(repo_id, exist_ok=True, private=private)
            info = api.upload_folder(
                repo_id=repo_id,
                folder_path=tmp,
                commit_message=commit_message or f"Upload {model.model_type} with zoo",
            )
    return {"repo": repo_id, "commit": info.oid, "files": files}
