"""``zoo escaip make-data | symmetry`` and ``zoo convert escaip``."""

from __future__ import annotations

from zoo._cli import Commands, Options, arg, from_args, load_model, option

escaip = Commands("escaip", "EScAIP interatomic potentials: data generation, symmetry report")
register_cli = escaip.register_cli


@escaip.command("make-data", "labelled frames: xTB MD of named molecules and QM9, EMT slabs and bulk, the g2 test set",
                fields_of="zoo.escaip.make_data:DataPlan")
class MakeData(Options):  # and, as options, the fields of DataPlan
    out: str = arg("output folder (rerun the same command to resume)")
    list_systems: bool = option(False, "list the molecules, slabs and metals, then exit", flag="--list")
    workers: int = option(1, "parallel processes (one thread each)")

    def run(self) -> None:
        from zoo.escaip import make_data as md

        if self.list_systems:
            print("molecules (GFN2-xTB):", " ".join(sorted(md.MOLECULES)))
            print("slabs (EMT):", " ".join(sorted(md.SLABS)))
            print("bulk metals (EMT, --qm9):", " ".join(md.METALS))
            print("g2 test molecules (GFN2-xTB, --g2):", " ".join(md.g2_test_molecules()))
            return
        jobs = from_args(md.DataPlan, self).jobs(self.out)
        if not jobs:
            raise ValueError("nothing to do: give at least one molecule or slab")
        result = md.make_data(self.out, jobs, workers=self.workers)
        print(f"{result['frames']} / {result['total']} frames in {self.out}")
        for folder, err in result["errors"].items():
            print(f"failed: {folder}: {err}")


@escaip.command("symmetry", "energy invariance / force equivariance errors under rotations, translations")
class Symmetry(Options):
    name: str = arg("catalog name or zoo repo folder")
    dtype: str | None = option(None, "e.g. float64 (default: as stored)")
    rotations: int = option(32, "random rotations per kind (random, x, y, z)")
    translations: int = option(8, "random translations")
    structures: str | None = option(None, "extxyz / ASE db of structures to test (default: molecules and a slab)")
    seed: int = option(0, "random seed of the rotations and translations")
    json: str | None = option(None, "also write the report to this JSON file")

    def run(self) -> None:
        import ase.io

        from zoo.escaip.symmetry import format_report, symmetry_report

        structures = ase.io.read(self.structures, index=":") if self.structures else None
        report = symmetry_report(load_model(self), structures, n_rotations=self.rotations,
                                 n_translations=self.translations, seed=self.seed)
        print(format_report(report))
        if self.json:
            from zoo.io import write_json_atomic

            write_json_atomic(self.json, report)
            print(f"wrote {self.json}")


@escaip.command(None, "fairchem EScAIP inference checkpoint, or state dict + JSON config")
class Convert(Options):
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
        print(f"wrote {self.out}: EScAIP with {sum(p.numel() for p in module.parameters()):,} parameters "
              f"({'gradient' if module.model.gradient else 'direct'} forces)")
