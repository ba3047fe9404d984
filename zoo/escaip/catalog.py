"""EScAIP catalog entries (torch-free).

fairchem publishes no EScAIP checkpoint at a stable public URL, so there is no upstream entry; official
inference checkpoints convert locally with ``zoo convert escaip CHECKPOINT --out DIR``.
"""

from zoo.registry import ModelEntry, read_pins

PINS = read_pins(__package__)  # pins.json: the zoo repos' files (written by `zoo release`)

ENTRIES: list[ModelEntry] = [
    ModelEntry(
        name="escaip-tiny-emt", method="escaip", **PINS["escaip-tiny-emt"],
        architecture={"preset": "tiny", "hidden_size": 32, "num_layers": 2, "heads": 2, "direct_forces": True,
                      "parameters": 95_776},
        license="apache-2.0", paper="https://arxiv.org/abs/2410.24169",
        description="EScAIP (tiny) trained in the zoo on EMT MD of 8 metal slabs with adsorbates; the bundled default",
        metrics={"force_mae_meV_per_A": 16.9, "energy_mae_meV_per_atom": 3.5, "force_cos": 0.991,
                 "val_force_mae_meV_per_A": 17.3},
        recipe="recipes/escaip/tiny_emt.yaml",
    ),
    ModelEntry(
        name="escaip-qm9-xtb", method="escaip", **PINS["escaip-qm9-xtb"],
        architecture={"preset": "small", "hidden_size": 64, "num_layers": 3, "heads": 4, "knn_k": 16,
                      "direct_forces": False, "smooth_boo": True, "parameters": 458_048},
        license="apache-2.0", paper="https://arxiv.org/abs/2410.24169",
        description="EScAIP (small, conservative: forces and stress are -dE/dx, smooth for MD) trained in the zoo on "
                    "GFN2-xTB MD of 3,000 QM9 molecules + 123 motif molecules and EMT metals; the molecule default",
        metrics={"g2_force_mae_meV_per_A": 281.7, "g2_median_force_mae_meV_per_A": 91.5,
                 "val_force_mae_meV_per_A": 63.7, "nve_std_over_xtb_worst": 0.58},
        recipe="recipes/escaip/build_qm9_xtb.sh",
    ),
    ModelEntry(
        name="escaip-small-xtb", method="escaip", **PINS["escaip-small-xtb"],
        architecture={"preset": "small", "hidden_size": 64, "num_layers": 3, "heads": 4, "knn_k": 16,
                      "direct_forces": True, "parameters": 591_296},
        license="apache-2.0", paper="https://arxiv.org/abs/2410.24169",
        description="EScAIP (small) trained in the zoo on GFN2-xTB MD of 10 molecules + 2 water clusters and EMT metal slabs",
        metrics={"force_mae_meV_per_A": 43.6, "energy_mae_meV_per_atom": 7.4, "force_cos": 0.9952,
                 "unseen_force_mae_meV_per_A": 445.8, "slab_force_mae_meV_per_A": 17.2},
        recipe="recipes/escaip/small_xtb.yaml",
    ),
]
