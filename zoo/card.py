"""The model card ``zoo publish --card CARD.yaml`` (or ``zoo.publish(..., card=...)``) takes, and its check.

A model card is a YAML (or JSON) mapping of optional fields, which :data:`CARD_SUMMARY` lists. For example::

    name: my-model
    license: apache-2.0
    datasets: [my-data]
    metrics: [{name: val_loss, value: 0.31, dataset: my-data, split: validation}]

The card is checked before anything is written; a bad one is a ``zoo.errors.CardError`` naming the file and the
field. Torch-free, so the command line shows the format in ``--help`` and checks a card before it loads a model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from zoo.errors import CardError
from zoo.hparams import closest

TEMPLATE_PATH = Path(__file__).resolve().parent / "MODEL_CARD_TEMPLATE.md"  # package data; top-level link for readers

__all__ = ["CARD_SUMMARY", "check_card", "load_card"]

# the card format, for error messages and --help
CARD_SUMMARY = ("a card is a YAML/JSON mapping of optional fields: name, description, paper, license, usage, recipe, "
                "training, limitations, citation, base_model (text); tags, datasets (lists of text); metrics (a list "
                "of mappings such as {name: val_loss, value: 0.31, dataset: my-data, split: validation}: name and "
                "value required, optionally display, task, dataset, dataset_name, split)")

_TEXT_FIELDS = ("name", "description", "paper", "license", "usage", "recipe", "training", "limitations", "citation",
                "base_model")
_LIST_FIELDS = ("tags", "datasets", "metrics")
_METRIC_TEXT_FIELDS = ("name", "display", "task", "dataset", "dataset_name", "split")


def _shown(value: Any) -> str:
    return f"a mapping {value!r}" if isinstance(value, dict) else f"the {type(value).__name__} {value!r}"


def _unknown(key: Any, known: list[str]) -> str:
    close = closest(str(key), known, n=1)
    return f"unknown field {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def check_card(card: Any, source: str = "the model card") -> dict[str, Any]:
    """Return ``card`` if it follows the format (see this module); otherwise a CardError naming ``source``, the field and the
    format. Publishing calls it before it writes anything."""

    def fail(problem: str) -> CardError:
        return CardError(f"{source}: {problem}; {CARD_SUMMARY}")

    if not isinstance(card, dict):
        raise fail(f"expected a mapping of card fields, got {_shown(card)}")
    for key, value in card.items():
        if key not in _TEXT_FIELDS and key not in _LIST_FIELDS:
            raise fail(_unknown(key, sorted(_TEXT_FIELDS + _LIST_FIELDS)))
        if value is None:
            continue
        if key in _TEXT_FIELDS and not isinstance(value, str):
            raise fail(f"{key} must be text, got {_shown(value)}")
        if key in _LIST_FIELDS and not isinstance(value, list):
            raise fail(f"{key} must be a list, got {_shown(value)}")
    for key in ("tags", "datasets"):
        for item in card.get(key) or []:
            if not isinstance(item, str):
                raise fail(f"{key} must be a list of text, got the entry {_shown(item)}")
    for i, metric in enumerate(card.get("metrics") or []):
        where = f"metrics[{i}]"
        if not isinstance(metric, dict):
            raise fail(f"{where} must be a mapping with a name and a value, got {_shown(metric)}")
        for key in ("name", "value"):
            if metric.get(key) is None:
                raise fail(f"{where} lacks {key!r}")
        for key, value in metric.items():
            if key != "value" and key not in _METRIC_TEXT_FIELDS:
                raise fail(f"{where}: " + _unknown(key, sorted(("value", *_METRIC_TEXT_FIELDS))))
            if not (isinstance(value, (int, float, str)) and not isinstance(value, bool) if key == "value"
                    else value is None or isinstance(value, str)):
                raise fail(f"{where}.{key} must be {'a number or text' if key == 'value' else 'text'}, "
                           f"got {_shown(value)}")
    return card


def load_card(path: str | os.PathLike) -> dict[str, Any]:
    """Read a model-card YAML/JSON file and check it (:func:`check_card`)."""
    import yaml

    try:
        card = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise CardError(f"{path} is not valid YAML or JSON ({' '.join(str(err).split())}); {CARD_SUMMARY}") from None
    return check_card(card, str(path))


def render_card(model, files: dict[str, dict[str, Any]], card: dict[str, Any] | None = None,
                config: dict[str, Any] | None = None) -> str:
    """The model card of ``model`` (a ZooModule): Hub YAML metadata (library, license, tags, datasets, base model,
    model-index) + the body of ``MODEL_CARD_TEMPLATE.md``.

    ``config``: the hparams the card shows (default ``model.config``); publishing passes the written config.json's.
    """
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    fields = {**model.model_card_fields(), **(card or {})}
    name = fields.get("name") or model.model_type
    metrics = fields.get("metrics", [])
    eval_results = [EvalResult(task_type=m.get("task", "other"), dataset_type=m.get("dataset", "custom"),
                               dataset_name=m.get("dataset_name", m.get("dataset", "custom")),
                               dataset_split=m.get("split"), metric_type=m["name"],
                               metric_name=m.get("display", m["name"]), metric_value=m["value"]) for m in metrics]
    data = ModelCardData(library_name="zoo", license=fields.get("license", "apache-2.0"),
                         tags=sorted(set(fields.get("tags", []))), datasets=fields.get("datasets") or None,
                         base_model=fields.get("base_model"), model_name=name, eval_results=eval_results or None)
    if not TEMPLATE_PATH.exists():
        raise FileNotFoundError(f"the model card template {TEMPLATE_PATH} is missing from this installation")
    texts = {key: fields.get(key, "") for key in ("description", "paper", "recipe", "training", "limitations",
                                                  "citation")}
    return str(ModelCard.from_template(data, template_path=str(TEMPLATE_PATH), name=name, method=model.method,
                                       model_type=model.model_type, metrics=metrics, files=files, **texts,
                                       usage=fields.get("usage") or f'import zoo\nmodel = zoo.load("{name}")',
                                       config=model.config if config is None else config))
