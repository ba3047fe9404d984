"""Left for ``zoo/cli.py`` until it imports ``zoo.publish``; goes then (``zoo.publish`` is ``zoo.module.publish``)."""

from zoo.module import publish

__all__ = ["publish"]
