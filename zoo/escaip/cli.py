"""``zoo escaip make-data | symmetry`` and ``zoo convert escaip``."""

from __future__ import annotations

from zoo._cli import Commands, arg, load_model, option

escaip = Commands("escaip", "EScAIP interatomic potentials: data generation, symmetry report")
register_cli = escaip.register_cli


@escaip.command("make-data", "labelled frames: xTB MD of named molecules and QM9, EMT slabs and bulk, the g2 test set")
class MakeData:
    out: str = arg("output folder (rerun the same command to resume)")
    qm9: int | None = option(None, "N QM9 molecules (no g2 formula) in blocks, with molecule pairs and strained EMT "
                             "bulk metals, instead of the named systems; needs `pip install qm9pack`", metavar="N",
                             one_of="mode")
    smiles: str | None = option(None, "as --qm9, for the molecules a SMILES list names (one per line, RDKit "
                                "conformers; no g2 formula); needs `pip install rdkit`", metavar="FILE", one_of="mode")
    g2: bool = option(False, "the g2 test set instead: xTB MD of every closed-shell H/C/N/O/F g2 molecule (defaults: "
                      "500 K, 25 frames, stride 40)", one_of="mode")
    molecules: list[str] | None = option(None, "molecule names (default: all; `--molecules` alone: none)", nargs="*")
    slabs: list[str] | None = option(None, "slab names (default: all; `--slabs` alone: none)", nargs="*")
    list_systems: bool = option(False, "list the molecules, slabs and metals, then exit", flag="--list")
    temperatures: list[float] | None = option(None, "thermostat temperatures, K (default: 300 500 800; --qm9: 300 600 "
                                              "1000, cycled over blocks)")
    seeds: int = option(2, "trajectories per named system and temperature")
    frames: int | None = option(None, "frames per trajectory (default: 300; --qm9: 9 per molecule, two thirds MD and "
                                "one third displaced copies)")
    slab_frames: int = option(100, "frames per slab trajectory, or per bulk metal (--qm9)")
    stride: int | None = option(None, "MD steps between saved frames (default: 10; --qm9: 8)")
    segment_frames: int = option(25, "frames per resumable segment file")
    qm9_source: str | None = option(None, "folder of qm9pack's qm9_part*.csv (default: the installed qm9pack)")
    block_molecules: int = option(50, "--qm9: molecules per block (the unit of splits)")
    no_pairs: bool = option(False, "--qm9: no molecule pairs")
    metals: list[str] | None = option(None, "--qm9: EMT bulk metals (default: all; `--metals` alone: none)", nargs="*")
    seed: int = option(0, "--qm9 and --g2: seed of the selection and the MD")
    workers: int = option(1, "parallel processes (one thread each)")


    def run(self) -> None:
        from zoo.escaip import make_data as md

        if self.list_systems:
            print("molecules (GFN2-xTB):", " ".join(sorted(md.MOLECULES)))
            print("slabs (EMT):", " ".join(sorted(md.SLABS)))
            print("bulk metals (EMT, --qm9):", " ".join(md.METALS))
            print("g2 test molecules (GFN2-xTB, --g2):", " ".join(md.g2_test_molecules()))
            return
        jobs = md.plan_data(self.out, qm9=self.qm9, smiles=self.smiles, g2=self.g2, molecules=self.molecules,
                            slabs=self.slabs, metals=self.metals, temperatures=self.temperatures, seeds=self.seeds,
                            frames=self.frames, slab_frames=self.slab_frames, stride=self.stride,
                            segment_frames=self.segment_frames, qm9_source=self.qm9_source,
                            block_molecules=self.block_molecules, pairs=not self.no_pairs, seed=self.seed)
        if not jobs:
            raise ValueError("nothing to do: give at least one molecule or slab")
        result = md.make_data(self.out, jobs, workers=self.workers)
        print(f"{result['frames']} / {result['total']} frames in {self.out}")
        for folder, err in result["errors"].items():
            print(f"failed: {folder}: {err}")


@escaip.command("symmetry", "energy invariance / force equivariance errors under rotations, translations")
class Symmetry:
    name: str = arg("catalog name or zoo repo folder")
    dtype: str | None = option(None, "e.g. float64 (default: as stored)")
    rotations: int = option(32, "random rotations per kind (random, x, y, z)")
    translations: int = option(8, "random translations")
    structures: str | None = option(None, "extxyz / ASE db of structures to test (default: molecules and a slab)")
    seed: int = option(0, "random seed of the rotations and translations")
    json: str | None = option(None, "also write the report to this JSON file")


    def run(self) -> None:
        from zoo.escaip.symmetry import format_report, symmetry_report

        structures = None
        if self.structures:
            import ase.io

            structures = ase.io.read(self.structures, index=":")
        report = symmetry_report(load_model(self), structures, n_rotations=self.rotations,
                                 n_translations=self.translations, seed=self.seed)
        print(format_report(report))
        if self.json:
            from zoo.io import write_json_atomic

            write_json_atomic(self.json, report)
            print(f"wrote {self.json}")


@escaip.command(None, "fairchem EScAIP inference checkpoint, or state dict + JSON config")
class Convert:
    src: str = arg("fairchem inference checkpoint (.pt), or a state dict (.safetensors/.pt) with --config")
    out: str = option(help="output zoo repo folder")
    config: str | None = option(None, "JSON with backbone_kwargs and heads (for a state-dict SRC)")
    ema: bool = option(False, "use the checkpoint's EMA weights")
    dataset: str | None = option(None, "whose normaliser/element references to apply (multi-dataset checkpoints)")


    def run(self) -> None:
        from zoo.escaip.convert import convert_checkpoint, convert_state_dict

        if self.config:
            module = convert_state_dict(self.src, self.config, self.out)
        else:
            module = convert_checkpoint(self.src, self.out, use_ema=self.ema, dataset=self.dataset)
        n = sum(p.numel() for p in module.parameters())
        print(f"wrote {self.out}: EScAIP with {n:,} parameters "
              f"({'gradient' if module.model.gradient else 'direct'} forces)")
