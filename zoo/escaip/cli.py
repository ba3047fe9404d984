"""``zoo escaip make-data | symmetry`` and ``zoo convert escaip``."""

from __future__ import annotations

from zoo._cli import arg, command, commands, load_model, option, options


@options
class MakeDataOptions:
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


def cmd_make_data(o: MakeDataOptions) -> None:
    from zoo.escaip import make_data as md

    if o.list_systems:
        print("molecules (GFN2-xTB):", " ".join(sorted(md.MOLECULES)))
        print("slabs (EMT):", " ".join(sorted(md.SLABS)))
        print("bulk metals (EMT, --qm9):", " ".join(md.METALS))
        print("g2 test molecules (GFN2-xTB, --g2):", " ".join(md.g2_test_molecules()))
        return
    jobs = md.plan_data(o.out, qm9=o.qm9, smiles=o.smiles, g2=o.g2, molecules=o.molecules, slabs=o.slabs,
                        metals=o.metals, temperatures=o.temperatures, seeds=o.seeds, frames=o.frames,
                        slab_frames=o.slab_frames, stride=o.stride, segment_frames=o.segment_frames,
                        qm9_source=o.qm9_source, block_molecules=o.block_molecules, pairs=not o.no_pairs, seed=o.seed)
    if not jobs:
        raise ValueError("nothing to do: give at least one molecule or slab")
    result = md.make_data(o.out, jobs, workers=o.workers)
    print(f"{result['frames']} / {result['total']} frames in {o.out}")
    for folder, err in result["errors"].items():
        print(f"failed: {folder}: {err}")


@options
class SymmetryOptions:
    name: str = arg("catalog name or zoo repo folder")
    dtype: str | None = option(None, "e.g. float64 (default: as stored)")
    rotations: int = option(32, "random rotations per kind (random, x, y, z)")
    translations: int = option(8, "random translations")
    structures: str | None = option(None, "extxyz / ASE db of structures to test (default: molecules and a slab)")
    seed: int = option(0, "random seed of the rotations and translations")
    json: str | None = option(None, "also write the report to this JSON file")


def cmd_symmetry(o: SymmetryOptions) -> None:
    from zoo.escaip.symmetry import format_report, symmetry_report

    model = load_model(o)
    structures = None
    if o.structures:
        import ase.io

        structures = ase.io.read(o.structures, index=":")
    report = symmetry_report(model, structures, n_rotations=o.rotations, n_translations=o.translations, seed=o.seed)
    print(format_report(report))
    if o.json:
        from zoo.io import write_json_atomic

        write_json_atomic(o.json, report)
        print(f"wrote {o.json}")


@options
class ConvertOptions:
    src: str = arg("fairchem inference checkpoint (.pt), or a state dict (.safetensors/.pt) with --config")
    out: str = option(help="output zoo repo folder")
    config: str | None = option(None, "JSON with backbone_kwargs and heads (for a state-dict SRC)")
    ema: bool = option(False, "use the checkpoint's EMA weights")
    dataset: str | None = option(None, "whose normaliser/element references to apply (multi-dataset checkpoints)")


def cmd_convert(o: ConvertOptions) -> None:
    from zoo.escaip.convert import convert_checkpoint, convert_state_dict

    if o.config:
        module = convert_state_dict(o.src, o.config, o.out)
    else:
        module = convert_checkpoint(o.src, o.out, use_ema=o.ema, dataset=o.dataset)
    n = sum(p.numel() for p in module.parameters())
    print(f"wrote {o.out}: EScAIP with {n:,} parameters ({'gradient' if module.model.gradient else 'direct'} forces)")


def register_cli(parent, convert) -> None:
    sub = commands(parent, "escaip", "EScAIP interatomic potentials: data generation, symmetry report")
    command(sub, "make-data", cmd_make_data, "labelled frames: xTB MD of named molecules and QM9, EMT slabs and bulk, "
            "the g2 test set")
    command(sub, "symmetry", cmd_symmetry, "energy invariance / force equivariance errors under rotations, "
            "translations")
    command(convert, "escaip", cmd_convert, "fairchem EScAIP inference checkpoint, or state dict + JSON config")
