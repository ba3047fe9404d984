"""Left for the CLI modules until they import ``zoo.load``; goes then (``zoo.load`` is
``ZooModule.from_pretrained``)."""

from zoo.module import ZooModule, parse_dtype

__all__ = ["load", "parse_dtype"]

load = ZooModule.from_pretrained
