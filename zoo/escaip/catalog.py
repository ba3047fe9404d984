"""EScAIP catalog entries (torch-free).

fairchem publishes no EScAIP checkpoint at a stable public URL, so there is no upstream entry; official
inference checkpoints convert locally with ``zoo convert escaip CHECKPOINT --out DIR``.
"""

from zoo.registry import FileSpec, ModelEntry

ENTRIES: list[ModelEntry] = [
    ModelEntry(
        name="escaip-tiny-emt",
        method="escaip",
        source="embedded",
        repo="escaip-tiny-emt",
        files=(
            FileSpec("README.md", "bd370b0b9d69b8415282cfdae091feebde4b88686f898fefe67b4ce881803501", 6598),
            FileSpec("config.json", "97926e28a5b490dfd97234ded6f4652739c2ddf1e6f115a3ddb6e27678bff320", 2220),
            FileSpec("force_parity.png", "de882cc94daf9a70e2247f57411893acea91508ba2de4b0e19ff3f92f5954d84", 33602),
            FileSpec("model.safetensors", "7f5cf7e25eede68172ef50e1fed10b99d123249f50c582131a9554ace38eb40c", 403519),
        ),
        architecture={"preset": "tiny", "hidden_size": 32, "num_layers": 2, "heads": 2, "direct_forces": True,
                      "parameters": 95_776},
        license="apache-2.0",
        paper="https://arxiv.org/abs/2410.24169",
        description="EScAIP (tiny) trained in the zoo on EMT MD of 8 metal slabs with adsorbates; the bundled default",
        metrics={"force_mae_meV_per_A": 383.4, "energy_mae_meV_per_atom": 131.7, "force_cos": 0.737,
                 "val_force_mae_meV_per_A": 17.6},
        recipe="recipes/escaip/tiny_emt.yaml",
    ),
]
