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
            FileSpec("README.md", "67a45d6e8fade699758a7fb97d4085300f379682bc8eb02954a5c2f87908fa50", 8192),
            FileSpec("config.json", "f46689d9d4b7ca4de0a22aaf6ee56839c3183c3e389c7f1730485d64eb833979", 2221),
            FileSpec("force_parity.png", "9ba14c439674536994edba7cfb4d6573a8facfbe0158fd61efb600b39c2ebebc", 40298),
            FileSpec("model.safetensors", "ca6f89ed4eb0d70de76cda400a7b3a86e97f5c1a88bbde5aab7a21f6de597285", 403519),
        ),
        architecture={"preset": "tiny", "hidden_size": 32, "num_layers": 2, "heads": 2, "direct_forces": True,
                      "parameters": 95_776},
        license="apache-2.0",
        paper="https://arxiv.org/abs/2410.24169",
        description="EScAIP (tiny) trained in the zoo on EMT MD of 8 metal slabs with adsorbates; the bundled default",
        metrics={"force_mae_meV_per_A": 17.3, "energy_mae_meV_per_atom": 3.3, "force_cos": 0.990,
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
