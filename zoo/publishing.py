"""Publishing: a model (or a Lightning checkpoint of one) → a Hub-shaped repo in a folder or on the Hub.

A repo is ``config.json``, ``model.safetensors`` (or shards + index) and ``README.md``, a model card
rendered from ``MODEL_CARD_TEMPLATE.md`` with Hub metadata. The returned dict (and the CLI's output) holds
the commit and each file's sha256 and size: exactly what a catalog entry pins.
"""

from __future__ import annotations

import os
from typing import Any

from zoo.module import ZooModule

__all__ = ["publish"]


def publish(model: ZooModule | str | os.PathLike, repo: str | os.PathLike, **kwargs) -> dict[str, Any]:
    """``model.publish(repo, **kwargs)`` (see :meth:`ZooModule.publish`); ``model`` may also be the path of a
    Lightning checkpoint of a ZooModule, published with the weights ``save_pretrained`` would write."""
    if not isinstance(model, ZooModule):
        model = ZooModule.from_checkpoint(model)
    return model.publish(repo, **kwargs)
