"""EScAIP catalog entries (torch-free).

fairchem publishes no EScAIP checkpoint at a stable public URL, so there is no upstream entry; official
inference checkpoints convert locally with ``zoo convert escaip CHECKPOINT --out DIR``.
"""

from zoo.registry import ModelEntry

ENTRIES: list[ModelEntry] = []
