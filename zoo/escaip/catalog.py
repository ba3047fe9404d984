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
            FileSpec("README.md", "8534ad2e79f7a890490955194242b2cf72e0f1211d2f436ea486d1ce861ec152", 7684),
            FileSpec("config.json", "97926e28a5b490dfd97234ded6f4652739c2ddf1e6f115a3ddb6e27678bff320", 2220),
            FileSpec("force_parity.png", "4368a2d1c2d78226164673b56dd79ba9eab5824dad75cd530c5cd11d541ecc5b", 42842),
            FileSpec("model.safetensors", "7f5cf7e25eede68172ef50e1fed10b99d123249f50c582131a9554ace38eb40c", 403519),
        ),
        architecture={"preset": "tiny", "hidden_size": 32, "num_layers": 2, "heads": 2, "direct_forces": True,
                      "parameters": 95_776},
        license="apache-2.0",
        paper="https://arxiv.org/abs/2410.24169",
        description="EScAIP (tiny) trained in the zoo on EMT MD of 8 metal slabs with adsorbates; the bundled default",
        metrics={"force_mae_meV_per_A": 22.1, "energy_mae_meV_per_atom": 13.2, "force_cos": 0.989,
                 "val_force_mae_meV_per_A": 17.6},
        recipe="recipes/escaip/tiny_emt.yaml",
    ),
    ModelEntry(
        name="escaip-small-xtb",
        method="escaip",
        source="embedded",
        repo="escaip-small-xtb",
        files=(
            FileSpec("README.md", "139b044d03e2b91d5fade4777f18935559800fc2bdff1a89dafa9a3d7d468139", 11291),
            FileSpec("config.json", "64368eff8bd3bc213600db47ce0a8404fdf67cae08ebddb19009e62f8959ed60", 2223),
            FileSpec("force_parity.png", "698ad226f280f3b37c642d050cfcdb6a025f4dabdec27640695fdbc779653e9a", 197571),
            FileSpec("metrics.json", "50c56f18abe4db32f1f699ce4fbbba87bb0537b971d348b2f1843a2ad8001dfd", 7621),
            FileSpec("model.safetensors", "f72b7854c6566aedc04743da74094dd9d8a20973340cc3d25b3f62678722fabd", 2392351),
        ),
        architecture={"preset": "small", "hidden_size": 64, "num_layers": 3, "heads": 4, "knn_k": 16,
                      "direct_forces": True, "parameters": 591_296},
        license="apache-2.0",
        paper="https://arxiv.org/abs/2410.24169",
        description="EScAIP (small) trained in the zoo on GFN2-xTB MD of 10 molecules + 2 water clusters and EMT metal slabs",
        metrics={"force_mae_meV_per_A": 41.2, "energy_mae_meV_per_atom": 7.8, "force_cos": 0.9958,
                 "unseen_force_mae_meV_per_A": 348.5, "slab_force_mae_meV_per_A": 16.5},
        recipe="recipes/escaip/small_xtb.yaml",
    ),
]
