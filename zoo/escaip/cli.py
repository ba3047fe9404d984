"""``zoo escaip make-data | symmetry`` and ``zoo convert escaip``."""

from __future__ import annotations

from zoo._cli import add_model_argument, load_model


def register_cli(commands, convert) -> None:
    p = commands.add_parser("escaip", help="EScAIP interatomic potentials: data generation, symmetry report")
    sub = p.add_subparsers(dest="escaip_command", metavar="COMMAND", required=True)

    d = sub.add_parser("make-data", help="labelled frames: xTB MD of named molecules and QM9, EMT slabs and bulk, the "
                       "g2 test set")
    d.add_argument("out", help="output folder (rerun the same command to resume)")
    mode = d.add_mutually_exclusive_group()
    mode.add_argument("--qm9", type=int, metavar="N", help="N QM9 molecules (no g2 formula) in blocks, with molecule "
                      "pairs and strained EMT bulk metals, instead of the named systems; needs `pip install qm9pack`")
    mode.add_argument("--smiles", metavar="FILE", help="as --qm9, for the molecules a SMILES list names (one per line, "
                      "RDKit conformers; no g2 formula); needs `pip install rdkit`")
    mode.add_argument("--g2", action="store_true", help="the g2 test set instead: xTB MD of every closed-shell H/C/N/O/F "
                      "g2 molecule (defaults: 500 K, 25 frames, stride 40)")
    d.add_argument("--molecules", nargs="*", help="molecule names (default: all; `--molecules` alone: none)")
    d.add_argument("--slabs", nargs="*", help="slab names (default: all; `--slabs` alone: none)")
    d.add_argument("--list", action="store_true", help="list the molecules, slabs and metals, then exit")
    d.add_argument("--temperatures", nargs="+", type=float,
                   help="thermostat temperatures, K (default: 300 500 800; --qm9: 300 600 1000, cycled over blocks)")
    d.add_argument("--seeds", type=int, default=2, help="trajectories per named system and temperature")
    d.add_argument("--frames", type=int, help="frames per trajectory (default: 300; --qm9: 9 per molecule, two "
                   "thirds MD and one third displaced copies)")
    d.add_argument("--slab-frames", type=int, default=100, help="frames per slab trajectory, or per bulk metal (--qm9)")
    d.add_argument("--stride", type=int, help="MD steps between saved frames (default: 10; --qm9: 8)")
    d.add_argument("--segment-frames", type=int, default=25, help="frames per resumable segment file")
    d.add_argument("--qm9-source", help="folder of qm9pack's qm9_part*.csv (default: the installed qm9pack)")
    d.add_argument("--block-molecules", type=int, default=50, help="--qm9: molecules per block (the unit of splits)")
    d.add_argument("--no-pairs", action="store_true", help="--qm9: no molecule pairs")
    d.add_argument("--metals", nargs="*", help="--qm9: EMT bulk metals (default: all; `--metals` alone: none)")
    d.add_argument("--seed", type=int, default=0, help="--qm9 and --g2: seed of the selection and the MD")
    d.add_argument("--workers", type=int, default=1, help="parallel processes (one thread each)")
    d.set_defaults(func=_make_data)

    s = sub.add_parser("symmetry", help="energy invariance / force equivariance errors under rotations, translations")
    add_model_argument(s, "catalog name or zoo repo folder", device=False, dtype="e.g. float64 (default: as stored)")
    s.add_argument("--rotations", type=int, default=32, help="random rotations per kind (random, x, y, z)")
    s.add_argument("--translations", type=int, default=8, help="random translations")
    s.add_argument("--structures", help="extxyz / ASE db of structures to test (default: molecules and a slab)")
    s.add_argument("--seed", type=int, default=0, help="random seed of the rotations and translations")
    s.add_argument("--json", help="also write the report to this JSON file")
    s.set_defaults(func=_symmetry)

    c = convert.add_parser("escaip", help="fairchem EScAIP inference checkpoint, or state dict + JSON config")
    c.add_argument("src", help="fairchem inference checkpoint (.pt), or a state dict (.safetensors/.pt) with --config")
    c.add_argument("--out", required=True, help="output zoo repo folder")
    c.add_argument("--config", help="JSON with backbone_kwargs and heads (for a state-dict SRC)")
    c.add_argument("--ema", action="store_true", help="use the checkpoint's EMA weights")
    c.add_argument("--dataset", help="whose normaliser/element references to apply (multi-dataset checkpoints)")
    c.set_defaults(func=_convert)


def _make_data(args) -> None:
    from zoo.escaip import make_data as md

    if args.list:
        print("molecules (GFN2-xTB):", " ".join(sorted(md.MOLECULES)))
        print("slabs (EMT):", " ".join(sorted(md.SLABS)))
        print("bulk metals (EMT, --qm9):", " ".join(md.METALS))
        print("g2 test molecules (GFN2-xTB, --g2):", " ".join(md.g2_test_molecules()))
        return
    if args.qm9 is not None or args.smiles:
        metals = list(md.METALS) if args.metals is None else args.metals
        unknown = sorted(set(metals) - set(md.METALS))
        if (args.qm9 is not None and args.qm9 < 1) or unknown:
            raise ValueError(f"unknown metals {unknown}; choose from {list(md.METALS)}" if unknown
                             else "--qm9 needs a positive number of molecules")
        # the selection is made once (a resumed run reads it back), so the count comes without building molecules
        if args.smiles:
            n_molecules, select = len(md.smiles_lines(args.smiles)), lambda: md.select_smiles(args.smiles, args.seed)
        else:
            n_molecules, select = args.qm9, lambda: md.select_qm9(args.qm9, args.seed, args.qm9_source)
        md.write_selection(args.out, select, n_molecules)
        jobs = md.plan_qm9_jobs(n_molecules, args.block_molecules, args.temperatures or [300.0, 600.0, 1000.0],
                                args.frames or 9, args.stride or 8, args.seed, not args.no_pairs, metals,
                                args.slab_frames, args.segment_frames)
    elif args.g2:
        frames = args.frames or 25
        jobs = [md.Job("g2", name, float(t), args.seed, frames, args.stride or 40, 0.5, frames)
                for name in md.g2_test_molecules() for t in args.temperatures or [500.0]]
    else:
        molecules = sorted(md.MOLECULES) if args.molecules is None else args.molecules
        slabs = sorted(md.SLABS) if args.slabs is None else args.slabs
        unknown = sorted(set(molecules) - set(md.MOLECULES)) + sorted(set(slabs) - set(md.SLABS))
        if unknown:
            raise ValueError(f"unknown systems {unknown}; see `zoo escaip make-data OUT --list`")
        jobs = md.plan_jobs(molecules, slabs, args.temperatures or [300.0, 500.0, 800.0], args.seeds,
                            args.frames or 300, args.slab_frames, args.stride or 10, args.segment_frames)
    if not jobs:
        raise ValueError("nothing to do: give at least one molecule or slab")
    result = md.make_data(args.out, jobs, workers=args.workers)
    print(f"{result['frames']} / {result['total']} frames in {args.out}")
    for folder, err in result["errors"].items():
        print(f"failed: {folder}: {err}")


def _symmetry(args) -> None:
    from zoo.escaip.symmetry import format_report, symmetry_report

    model = load_model(args)
    structures = None
    if args.structures:
        import ase.io

        structures = ase.io.read(args.structures, index=":")
    report = symmetry_report(model, structures, n_rotations=args.rotations, n_translations=args.translations,
                             seed=args.seed)
    print(format_report(report))
    if args.json:
        from zoo.io import write_json_atomic

        write_json_atomic(args.json, report)
        print(f"wrote {args.json}")


def _convert(args) -> None:
    from zoo.escaip.convert import convert_checkpoint, convert_state_dict

    if args.config:
        module = convert_state_dict(args.src, args.config, args.out)
    else:
        module = convert_checkpoint(args.src, args.out, use_ema=args.ema, dataset=args.dataset)
    n = sum(p.numel() for p in module.parameters())
    print(f"wrote {args.out}: EScAIP with {n:,} parameters ({'gradient' if module.model.gradient else 'direct'} forces)")
