"""``zoo escaip symmetry``: energies invariant, gradient forces equivariant, direct forces not (by design)."""

import json

from zoo.cli import main as zoo_main
from zoo.escaip.symmetry import symmetry_report

import zoo


def test_report_separates_gradient_and_direct_forces(official_repos):
    grad = symmetry_report(zoo.load(official_repos["gradient"]), n_rotations=2, n_translations=2, seed=1)
    direct = symmetry_report(zoo.load(official_repos["direct"]), n_rotations=2, n_translations=2, seed=1)
    assert set(grad["rotation"]) == {"random", "x", "y", "z"}
    for report in (grad, direct):
        for row in [*report["rotation"].values(), report["translation"]]:
            assert row["energy_max_per_atom"] < 1e-5  # float32 rounding
    for row in grad["rotation"].values():
        assert row["force_max"] < 1e-4 and row["force_cos"] > 0.9999
    assert max(row["force_max"] for row in direct["rotation"].values()) > 0.5  # not equivariant
    assert direct["translation"]["force_max"] < 1e-4  # but translation invariant


def test_cli_prints_and_writes_json(official_repos, tmp_path, capsys):
    out = tmp_path / "symmetry.json"
    assert zoo_main(["escaip", "symmetry", str(official_repos["gradient"]), "--rotations", "1",
                     "--translations", "1", "--dtype", "float64", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rotation random" in text and "translation" in text
    report = json.loads(out.read_text())
    assert report["rotation"]["z"]["energy_max"] < 1e-9  # float64: invariant to rounding
