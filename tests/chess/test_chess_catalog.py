import json
import zipfile

import pytest
from chess_testdata import FIXTURES, last_log_prob_error

import zoo
from zoo.registry import get_entry


def test_catalog_entries_point_at_the_official_zips():
    names = zoo.list_models(method="chess")
    assert {"chess-9m", "chess-136m", "chess-270m", "chess-9m-sv", "chess-9m-bc"} <= set(names)
    entry = get_entry("chess-270m")
    assert not entry.released and entry.converter == "zoo.chess.convert:from_upstream"
    assert entry.upstream[0].url == "https://storage.googleapis.com/searchless_chess/checkpoints/270M.zip"
    assert entry.upstream[0].sha256 is None
    assert get_entry("chess-9m-bc").upstream[0].url.endswith("/9M_behavioral_cloning.zip")
    assert get_entry("chess-9m-sv").convert_args["policy"] == "state_value"


def test_upstream_converter_on_an_official_style_zip(tmp_path, monkeypatch):
    """The catalog path: an official zip (Orbax checkpoint inside) served at the entry's URL, converted on first load."""
    pytest.importorskip("tensorstore")
    from dataclasses import replace

    from zoo.registry import FileSpec, register_model

    archive = tmp_path / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as z:
        root = FIXTURES / "model_av_tiny" / "orbax"
        for path in root.rglob("*"):
            if path.is_file():
                z.write(path, "tiny/" + str(path.relative_to(root)))
    entry = replace(
        get_entry("chess-9m"),
        name="chess-test-tiny-zip",
        upstream=(FileSpec("tiny.zip", None, None, archive.as_uri()),),
        convert_args={**get_entry("chess-9m").convert_args, "num_heads": 4, "num_params": 102_816},
    )
    register_model(entry)
    assert last_log_prob_error(zoo.load("chess-test-tiny-zip")) <= 1e-5


def test_cli_convert_and_board(tmp_path, capsys):
    from zoo.cli import main

    out = tmp_path / "repo"
    assert main(["convert", "chess", str(FIXTURES / "model_av_tiny" / "params.npz"), "--out", str(out), "--num-heads", "4",
                 "--policy", "action_value"]) == 0
    assert "102,816 parameters" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["hparams"]["num_heads"] == 4
    assert main(["chess", "board", str(out), "--out", str(tmp_path / "b.svg"), "--fen", "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"]) == 0
    assert (tmp_path / "b.svg").read_text().startswith("<svg")
    assert main(["chess", "board", str(out), "--fen", "not a fen"]) == 2
    assert "error" in capsys.readouterr().err
