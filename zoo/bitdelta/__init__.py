"""BitDelta ("Your Fine-Tune May Only Be Worth One Bit", NeurIPS 2024): fine-tunes as 1-bit deltas of a base.

Deltas (``zoo.bitdelta.delta``) are hub repos naming their base; ``zoo.load("<delta>")`` loads the base and applies
the delta. Many deltas can share one base in a multi-tenant batch (``zoo.bitdelta.serve``). Heavy parts import on
first use.
"""

from zoo.registry import register_method

register_method(
    "bitdelta",
    modules={
        "bitdelta": "zoo.bitdelta.module:BitDeltaModule",
        "bitdelta-distill": "zoo.bitdelta.module:ScaleDistillation",
        "bitdelta-causal-lm": "zoo.bitdelta.module:CausalLM",
    },
    catalog="zoo.bitdelta.catalog",
    cli="zoo.bitdelta.cli:register_cli",
    paper="https://arxiv.org/abs/2402.10193",
)
