"""RCG: representation-conditioned generation (Li, Katabi, He; NeurIPS 2024).

Unconditional image generation in two steps: a representation diffusion model (RDM) samples a self-supervised
MoCo v3 representation, then MAGE (a masked generative transformer over VQGAN tokens) draws the image
conditioned on it. ``zoo.load("rcg-imagenet256")`` returns :class:`zoo.rcg.pipeline.RCGPipeline`.
This module stays torch-free: the heavy parts are registered by dotted path.
"""

from zoo.registry import register_method

register_method(
    "rcg",
    modules={
        "rcg-pipeline": "zoo.rcg.pipeline:RCGPipeline",
        "rcg-mocov3": "zoo.rcg.module:MocoV3Module",
        "rcg-vqgan": "zoo.rcg.module:VQGANModule",
        "rcg-rdm": "zoo.rcg.module:RDMModule",
        "rcg-mage": "zoo.rcg.module:MAGEModule",
    },
    catalog="zoo.rcg.catalog",
    cli="zoo.rcg.cli:register_cli",
    paper="https://arxiv.org/abs/2312.03701",
)
