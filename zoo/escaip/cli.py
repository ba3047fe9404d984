"""``zoo escaip make-data | symmetry`` and ``zoo convert escaip``."""

from __future__ import annotations

from zoo._cli import add_model_argument, load_model


def register_cli(commands, convert) -> None:
    p = commands.add_parser("escaip", help="EScAIP interatomic potentials: data generation, symmetry report")
    sub = p.add_subparsers(dest="escaip_command", metavar="COMMAND", required=True)

    d = sub.add_parser("make-data", help="Langevin MD labelled with GFN2-xTB (molecules) and EMT (metal slabs)")
    d.add_argument("out", help="output folder (rerun the same command to resume)")
    d.add_argument("--molecules", nargs="*", help="molecule names (default: all; `--molecules` alone: none)")
    d.add_argument("--slabs", nargs="*", help="slab names (default: all; `--slabs` alone: none)")
    d.add_argument("--list", action="store_true", help="list the molecules and slabs, then exit")
    d.add_argument("--temperatures", nargs="+", type=float, default=[300.0, 500.0, 800.0], help="thermostat temperatures, K")
    d.add_argument("--seeds", type=int, default=2, help="trajectories per system and temperature")
    d.add_argument("--frames", type=int, default=300, help="frames per molecule trajectory")
    d.add_argument("--slab-frames", type=int, default=100, help="frames per slab trajectory")
    d.add_argument("--stride", type=int, default=10, help="MD steps between saved frames")
    d.add_argument("--segment-frames", type=int, default=25, help="frames per resumable segment file")
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
    from zoo.escaip.make_data import MOLECULES, SLABS, make_data, plan_jobs

    if args.list:
        print("molecules (GFN2-xTB):", " ".join(sorted(MOLECULES)))
        print("slabs (EMT):", " ".join(sorted(SLABS)))
        return
    molecules = sorted(MOLECULES) if args.molecules is None else args.molecules
    slabs = sorted(SLABS) if args.slabs is None else args.slabs
    unknown = sorted(set(molecules) - set(MOLECULES)) + sorted(set(slabs) - set(SLABS))
    if unknown:
        raise ValueError(f"unknown systems {unknown}; see `zoo escaip make-data OUT --list`")
    jobs = plan_jobs(molecules, slabs, args.temperatures, args.seeds, args.frames, args.slab_frames,
                     args.stride, args.segment_frames)
    if not jobs:
        raise ValueError("nothing to do: give at least one molecule or slab")
    result = make_data(args.out, jobs, workers=args.workers)
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
        from zoo._io import write_json_atomic

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
