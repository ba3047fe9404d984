"""`zoo convert chess` takes from the files only what they carry: the head count and the AV/SV choice are never
guessed (issue 28: a 4-head model converted with the old default of 8 heads gave wrong outputs, an SV checkpoint
converted as an AV engine)."""

import json

import numpy as np
import pytest
from chess_testdata import FIXTURES, last_log_prob_error

import zoo
from zoo.chess.convert import catalog_convert_args, convert, infer_config, read_npz
from zoo.registry import get_entry


@pytest.fixture(scope="module")
def params():
    return read_npz(FIXTURES / "model_av_tiny" / "params.npz")


def test_head_count_is_required_and_a_wrong_one_gives_wrong_outputs(tmp_path):
    npz = FIXTURES / "model_av_tiny" / "params.npz"
    with pytest.raises(ValueError, match="--num-heads") as err:
        convert(npz, tmp_path / "guessed", policy="action_value")
    assert "not stored in the checkpoint" in str(err.value) and "--policy" not in str(err.value)
    # what the old silent default of 8 heads produced for this official 4-head model
    convert(npz, tmp_path / "eight", policy="action_value", num_heads=8)
    assert last_log_prob_error(zoo.load(tmp_path / "eight")) > 1e-2
    convert(npz, tmp_path / "four", policy="action_value", num_heads=4)
    assert last_log_prob_error(zoo.load(tmp_path / "four")) <= 1e-5


def test_value_heads_need_the_policy(params):
    """AV and SV trees are identical (128-way head): the policy must be given, never assumed to be AV."""
    with pytest.raises(ValueError, match="--policy") as err:
        infer_config(params, num_heads=4)
    assert "state_value" in str(err.value)
    assert infer_config(params, num_heads=4, policy="state_value").policy == "state_value"
    with pytest.raises(ValueError, match="--num-heads") as err:  # both missing: one error names both
        infer_config(params)
    assert "--policy" in str(err.value)


def test_a_1968_way_head_is_behavioural_cloning(params):
    rng = np.random.default_rng(0)
    bc = dict(params)
    bc["linear_6/w"] = rng.standard_normal((32, 1968)).astype(np.float32)
    bc["linear_6/b"] = np.zeros(1968, np.float32)
    assert infer_config(bc, num_heads=4).policy == "behavioral_cloning"
    with pytest.raises(ValueError, match="does not fit"):
        infer_config(bc, num_heads=4, policy="action_value")
    with pytest.raises(ValueError, match="does not divide"):
        infer_config(bc, num_heads=5)


def test_cli_refuses_to_guess(tmp_path, capsys):
    from zoo.cli import main

    out = tmp_path / "repo"
    assert main(["convert", "chess", str(FIXTURES / "model_av_tiny" / "params.npz"), "--out", str(out)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("zoo: error:") and "--num-heads" in err[0] and "--policy" in err[0]
    assert not (out / "config.json").exists()
    assert main(["convert", "chess", str(FIXTURES / "model_av_tiny" / "params.npz"), "--out", str(out),
                 "--num-heads", "4", "--policy", "state_value"]) == 0
    assert json.loads((out / "config.json").read_text())["hparams"]["policy"] == "state_value"


def test_catalog_entries_carry_what_the_files_do_not():
    expected = {"chess-9m": "action_value", "chess-136m": "action_value", "chess-270m": "action_value",
                "chess-9m-sv": "state_value", "chess-9m-bc": "behavioral_cloning"}
    from zoo.chess.catalog import ENTRIES  # the catalog itself: other tests register entries in this process

    upstream = [e.name for e in ENTRIES if e.converter]
    assert sorted(upstream) == sorted(expected)
    for name, policy in expected.items():
        args = catalog_convert_args(get_entry(name))
        assert (args["num_heads"], args["policy"]) == (8, policy)
    entry = get_entry("chess-9m")
    bare = type(entry)(**{**entry.__dict__, "convert_args": {"step": 6_400_000}})
    with pytest.raises(ValueError, match="num_heads"):
        catalog_convert_args(bare)
