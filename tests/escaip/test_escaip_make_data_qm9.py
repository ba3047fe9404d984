"""make-data for the conservative molecule potential: QM9 blocks, molecule pairs, strained bulk metals, g2 test set."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from zoo.cli import main as zoo_main
from zoo.escaip.data import read_structures
from zoo.escaip.make_data import (g2_formulas, g2_test_molecules, make_data, plan_qm9_jobs, select_qm9,
                                  select_smiles, write_selection)

pytest.importorskip("tblite")
QM9 = Path(__file__).parents[1] / "fixtures" / "escaip" / "qm9"  # 12 rows of qm9pack's CSV (columns it needs)


def test_selection_leaves_out_every_g2_formula_and_takes_small_molecules_first():
    chosen = select_qm9(5, seed=0, source=QM9)
    again = select_qm9(5, seed=0, source=QM9)
    assert chosen == again and len(chosen) == 5
    smiles = {m["smiles"] for m in chosen}
    # CH4 NH3 H2O C2H2 HCN H2CO CF4 are g2 molecules
    assert not smiles & {"C", "N", "O", "C#C", "C#N", "C=O", "FC(F)(F)F"} and "CF4" in g2_formulas()
    assert {"NC(N)=O", "FC(F)(F)C#C"} <= smiles  # every other molecule of up to 5 heavy atoms is taken
    assert all(m["positions"] and len(m["positions"]) == len(m["symbols"]) for m in chosen)


def test_g2_test_set_is_closed_shell_hcnof():
    names = g2_test_molecules()
    assert len(names) == 73 and {"CH3CH2OH", "C6H6", "H2O", "CF4"} <= set(names)
    assert not {"CH3", "OH", "NO", "O2", "SiH4", "H"} & set(names)  # radicals, other elements, atoms


def _qm9_jobs():
    return plan_qm9_jobs(2, 2, [800.0], frames=3, stride=2, seed=0, metals=("Cu",), bulk_frames=3, segment_frames=3)


def test_qm9_blocks_pairs_and_bulk_are_labelled_and_resumable(tmp_path):
    from ase import Atoms
    from ase.calculators.emt import EMT
    from tblite.ase import TBLite

    write_selection(tmp_path, lambda: select_qm9(2, seed=1, source=QM9), 2)
    result = make_data(tmp_path, _qm9_jobs())
    assert result == {"frames": 2 * 3 + 2 * 3 + 3, "total": 15, "errors": {}}
    molecules = read_structures(tmp_path / "qm9")
    assert len(molecules) == 6  # per molecule two MD frames and one displaced copy
    xtb = molecules[2]
    atoms = Atoms(numbers=xtb["atomic_numbers"], positions=xtb["pos"], calculator=TBLite(method="GFN2-xTB", verbosity=0))
    assert atoms.get_potential_energy() == pytest.approx(xtb["energy"], abs=1e-6)
    np.testing.assert_allclose(atoms.get_forces(), xtb["forces"], atol=1e-3)  # SCF convergence
    pairs = read_structures(tmp_path / "pair")
    assert len(pairs) == 6 and all(len(p["atomic_numbers"]) > len(molecules[0]["atomic_numbers"]) for p in pairs)
    bulk = read_structures(tmp_path / "bulk")
    assert all(b["has_stress"] and b["pbc"].all() and len(b["atomic_numbers"]) == 32 for b in bulk)
    cu = bulk[0]
    atoms = Atoms(numbers=cu["atomic_numbers"], positions=cu["pos"], cell=cu["cell"], pbc=True, calculator=EMT())
    np.testing.assert_allclose(atoms.get_forces(), cu["forces"], atol=1e-6)

    segment = sorted((tmp_path / "qm9").rglob("seg_00001.extxyz"))[0]
    before = segment.read_text()
    segment.unlink()
    assert make_data(tmp_path, _qm9_jobs())["frames"] == 15  # only the missing molecule is redone, identically
    assert segment.read_text() == before


def test_cli_keeps_the_selection_of_a_resumed_run(tmp_path, capsys):
    out = tmp_path / "qm9data"
    args = ["escaip", "make-data", str(out), "--qm9", "2", "--qm9-source", str(QM9), "--frames", "3",
            "--stride", "2", "--block-molecules", "2", "--metals", "--no-pairs"]
    assert zoo_main(args) == 0
    assert "6 / 6 frames" in capsys.readouterr().out
    assert len(json.loads((out / "qm9_selection.json").read_text())) == 2
    assert zoo_main([*args[:4], "3", *args[5:]]) == 2
    assert "holds a selection of 2 molecules, not 3" in capsys.readouterr().err


def test_smiles_lists_give_rdkit_conformers_and_refuse_g2_formulas(tmp_path, capsys):
    pytest.importorskip("rdkit")
    listing = tmp_path / "molecules.smi"
    listing.write_text("# terminal alkene, cumulene, triple bond\nC=CCCC 1-pentene\n\nCC=C=O methylketene\nC=CC#C\n")
    molecules = select_smiles(listing)
    assert [m["smiles"] for m in molecules] == ["C=CCCC", "CC=C=O", "C=CC#C"] and molecules == select_smiles(listing)
    pentene = np.array(molecules[0]["positions"])
    assert molecules[0]["symbols"].count("H") == 10 and len(pentene) == 15
    distances = np.linalg.norm(pentene[:, None] - pentene[None], axis=-1)[np.triu_indices(15, 1)]
    assert 0.9 < distances.min() < 1.2  # a real conformer: C-H bonds, no overlapping atoms
    # 1-butene is no g2 molecule, but its formula is (isobutene): isomers are left out, as from QM9
    for line, message in (("C=CCC 1-butene", "formula C4H8 of a g2 molecule"), ("C[SiH3]", "elements ['Si']"),
                          ("C(C", "cannot parse")):
        listing.write_text(f"CC=C=O\n{line}\n")
        with pytest.raises(ValueError, match=fr"molecules.smi:2: .*{re.escape(message)}"):
            select_smiles(listing)
    listing.write_text("C=CCCC\n")
    out = tmp_path / "smiles-data"
    assert zoo_main(["escaip", "make-data", str(out), "--smiles", str(listing), "--frames", "3", "--stride", "2",
                     "--metals", "--no-pairs"]) == 0
    assert "3 / 3 frames" in capsys.readouterr().out
    (frames,) = [read_structures([folder]) for folder in (out / "qm9").iterdir()]
    assert len(frames) == 3 and all(len(f["atomic_numbers"]) == 15 for f in frames)
