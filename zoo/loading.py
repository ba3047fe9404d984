"""``zoo.load``: a catalog name, a Hub repo or a local folder in, a ready LightningModule out."""

from __future__ import annotations

from zoo.hub import resolve_repo
from zoo.module import ZooModule, parse_dtype, read_config

__all__ = ["load", "resolve_repo", "parse_dtype", "read_config"]

# any ZooModule: the class the repo's config.json names (see ZooModule.from_pretrained)
load = ZooModule.from_pretrained
