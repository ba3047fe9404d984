"""Bad inputs give one typed zoo error that names the file and the fix (issue 28), in Python and as one
``zoo: error:`` line from the command line."""

import json
import os
import shutil
from pathlib import Path

import pytest
from toy import ToyRegressor

import zoo
from zoo.cli import main
from zoo.errors import CardError, ConfigError, DamagedFileError, IntegrityError, ZooError
from zoo.hparams import check_arguments, check_value, dataclass_from_dict, reading_saved_config

ROOT = Path(__file__).resolve().parents[2]


def _repo(tmp_path: Path, edit=None) -> Path:
    repo = tmp_path / "repo"
    ToyRegressor(width=8).save_pretrained(repo)
    if edit is not None:
        config = json.loads((repo / "config.json").read_text())
        edit(config)
        (repo / "config.json").write_text(json.dumps(config))
    return repo


def _one_cli_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zoo: error: "), captured.err
    return lines[0]


def _bad_load(capsys, repo: Path, error: type, *fragments: str) -> None:
    with pytest.raises(error) as caught:
        zoo.load(repo)
    assert isinstance(caught.value, ZooError)
    for fragment in fragments:
        assert fragment in str(caught.value)
    line = _one_cli_error(capsys, ["load", str(repo)])
    for fragment in fragments:
        assert fragment in line


def test_unknown_hparam_names_key_file_and_closest(tmp_path, capsys):
    repo = _repo(tmp_path, lambda c: c["hparams"].update(widht=8))
    _bad_load(capsys, repo, ConfigError, str(repo / "config.json"), "'widht'", "did you mean 'width'",
              "valid options: width, depth, lr")


def test_wrong_hparam_type_names_key_type_value_and_file(tmp_path, capsys):
    repo = _repo(tmp_path, lambda c: c["hparams"].update(width="8"))
    _bad_load(capsys, repo, ConfigError, str(repo / "config.json"), "hparams.width must be int, got '8'")
    repo = _repo(tmp_path / "b", lambda c: c["hparams"].update(lr=True))
    _bad_load(capsys, repo, ConfigError, "hparams.lr must be float, got True")


def test_missing_required_hparam():
    def build(base: str, size: int = 1):
        return base, size

    with pytest.raises(ConfigError, match=r"hparams lacks base \(required by .*build\)"):
        check_arguments(build, {"size": 2}, "hparams")


def test_nested_config_typo_and_type_name_the_file(tmp_path, capsys):
    """EScAIP's backbone is a nested config dataclass: its keys and types are checked as strictly."""
    repo = tmp_path / "escaip"
    shutil.copytree(ROOT / "hub" / "escaip-tiny-emt", repo)
    config_path = repo / "config.json"
    original = json.loads(config_path.read_text())

    def write(edit):
        config = json.loads(json.dumps(original))
        edit(config["hparams"]["backbone"])
        config_path.write_text(json.dumps(config))

    write(lambda b: b.update(hidden_size="32"))  # was: TypeError "not all arguments converted during string formatting"
    _bad_load(capsys, repo, ConfigError, str(config_path), "backbone.hidden_size must be int, got '32'")
    write(lambda b: b.update(hiden_size=32))
    _bad_load(capsys, repo, ConfigError, str(config_path), "'hiden_size'", "did you mean 'hidden_size'")
    write(lambda b: b.update(energy_reduce="max"))  # the dataclass's own check
    _bad_load(capsys, repo, ConfigError, str(config_path), "energy_reduce must be sum or mean")


def test_constructor_check_names_the_file(tmp_path, capsys):
    """A constructor's own ValueError (an invalid combination) becomes a ConfigError naming config.json."""
    repo = tmp_path / "chess"
    shutil.copytree(ROOT / "hub" / "chess-small-av", repo)
    config = json.loads((repo / "config.json").read_text())
    config["hparams"]["lr_schedule"] = "cosin"
    (repo / "config.json").write_text(json.dumps(config))
    _bad_load(capsys, repo, ConfigError, str(repo / "config.json"), "ChessTransformerModule rejects",
              "lr_schedule must be 'constant'")


def test_unknown_model_type(tmp_path, capsys):
    repo = _repo(tmp_path, lambda c: c.update(model_type="toy-mpl"))
    _bad_load(capsys, repo, ConfigError, str(repo / "config.json"), "unknown model_type 'toy-mpl'",
              "did you mean 'toy-mlp'", "chess-transformer")


def test_invalid_json_names_the_file(tmp_path, capsys):
    repo = _repo(tmp_path)
    with open(repo / "config.json", "a") as f:
        f.write("}")
    _bad_load(capsys, repo, ConfigError, f"{repo / 'config.json'} is not valid JSON", "Extra data")
    (repo / "config.json").write_bytes(b"\xff\xfe{")
    _bad_load(capsys, repo, ConfigError, f"{repo / 'config.json'} is not valid JSON")


def test_newer_config_format_is_refused(tmp_path, capsys):
    repo = _repo(tmp_path, lambda c: c.update(zoo_config_format=99))
    _bad_load(capsys, repo, ConfigError, "written by a newer zoo", "zoo_config_format 99",
              "pip install -U lightning-zoo", str(repo / "config.json"))
    repo = _repo(tmp_path / "b", lambda c: c.update(zoo_config_format="1"))
    _bad_load(capsys, repo, ConfigError, "zoo_config_format must be a positive integer, got '1'")
    assert type(zoo.load(_repo(tmp_path / "c", lambda c: c.pop("zoo_config_format")))) is ToyRegressor


@pytest.mark.parametrize("keep", [4, 100, -10], ids=["header-size", "header", "data"])
def test_truncated_safetensors_is_damaged(tmp_path, capsys, keep):
    repo = _repo(tmp_path)
    weights = repo / "model.safetensors"
    os.truncate(weights, keep if keep > 0 else weights.stat().st_size + keep)
    _bad_load(capsys, repo, DamagedFileError, f"{weights} is damaged", "download the model again")
    with pytest.raises(IntegrityError):  # a damaged file is an integrity problem, as a sha256 mismatch is
        zoo.load(repo)


def test_damaged_shard_index(tmp_path, capsys):
    repo = tmp_path / "repo"
    ToyRegressor(width=64, depth=4).save_pretrained(repo, max_shard_bytes=10_000)
    (repo / "model.safetensors.index.json").write_text('{"metadata": {}}')
    _bad_load(capsys, repo, DamagedFileError, "model.safetensors.index.json is damaged", "weight_map")


# ----------------------------------------------------------------------------- model cards
@pytest.mark.parametrize("metrics, problem", [
    ("\n  fid: 2.1", "metrics must be a list, got a mapping {'fid': 2.1}"),
    (" 3", "metrics must be a list, got the int 3"),
    ("\n  - 2.1", "metrics[0] must be a mapping with a name and a value, got the float 2.1"),
    ("\n  - {name: fid}", "metrics[0] lacks 'value'"),
    ("\n  - {name: fid, value: [1]}", "metrics[0].value must be a number or text, got the list [1]"),
], ids=["mapping", "number", "list-of-numbers", "no-value", "list-value"])
def test_bad_card_metrics_leave_nothing_behind(tmp_path, capsys, metrics, problem):
    repo = _repo(tmp_path)
    card = tmp_path / "card.yaml"
    card.write_text(f"name: toy\nmetrics:{metrics}\n")
    line = _one_cli_error(capsys, ["publish", str(repo), str(tmp_path / "out"), "--card", str(card)])
    assert f"{card}: {problem}" in line and "name and value required" in line  # the format, in the message
    assert not (tmp_path / "out").exists()
    with pytest.raises(CardError, match="metrics"):
        zoo.publish(zoo.load(repo), tmp_path / "out2", card=card)
    with pytest.raises(CardError, match="metrics"):
        zoo.publish(zoo.load(repo), tmp_path / "out2", card={"metrics": {"fid": 2.1}})
    assert not (tmp_path / "out2").exists()


def test_card_typo_and_broken_yaml(tmp_path, capsys):
    repo = _repo(tmp_path)
    card = tmp_path / "card.yaml"
    card.write_text("descripton: a toy\n")
    line = _one_cli_error(capsys, ["publish", str(repo), str(tmp_path / "out"), "--card", str(card)])
    assert "unknown field 'descripton' (did you mean 'description'?)" in line
    card.write_text("metrics: [\n")
    line = _one_cli_error(capsys, ["publish", str(repo), str(tmp_path / "out"), "--card", str(card)])
    assert f"{card} is not valid YAML or JSON" in line
    assert not (tmp_path / "out").exists()


def test_good_cards_publish(tmp_path, capsys):
    from zoo.card import load_card

    for path in sorted(ROOT.glob("recipes/*/cards/*.yaml")):  # every card the zoo ships passes the check
        load_card(path)
    repo = _repo(tmp_path)
    card = tmp_path / "card.yaml"
    card.write_text("name: toy\nmetrics:\n  - {name: mse, value: 0.25, split: test}\n  - {name: note, value: n/a}\n")
    assert main(["publish", str(repo), str(tmp_path / "out"), "--card", str(card)]) == 0
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "| mse | 0.25 |" in readme and "| note | n/a |" in readme


def test_card_format_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["publish", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "metrics (a list of mappings" in out and "name and value required" in out


# ----------------------------------------------------------------------------- the checker itself
def test_value_checks():
    assert check_value([0.5, 0.9], tuple[float, float] | list[float], "betas") == [0.5, 0.9]
    assert check_value(2, float, "lr") == 2.0 and isinstance(check_value(2, float, "lr"), float)
    assert check_value({"a": [1, 2]}, dict[str, list[int]], "modules") == {"a": [1, 2]}
    for value, kind, message in ((True, int, "x must be int, got True"), (2.5, int, "x must be int, got 2.5"),
                                 ([1, "a"], list[int], r"x must be list\[int\]"), ("y", float | None,
                                                                                    "x must be float | None")):
        with pytest.raises(ConfigError, match=message):
            check_value(value, kind, "x")
    # a command-line override arrives as text and is read as YAML; a saved config's text stays text
    assert check_value("64", int, "x") == 64 and check_value("1e-4", float, "x") == 1e-4
    with reading_saved_config(), pytest.raises(ConfigError, match="x must be int, got '64'"):
        check_value("64", int, "x")


def _build(width: int, device: "TorchDevice" = None, sizes: "list[int]" = ()):  # noqa: F821
    """A constructor whose annotation names a type imported only for type checkers."""


def test_unresolvable_annotations_are_left_unchecked():
    check_arguments(_build, {"width": 2, "device": "cpu", "sizes": [1]}, "hparams")
    with pytest.raises(ConfigError, match=r"hparams.sizes must be list\[int\], got \['a'\]"):
        check_arguments(_build, {"width": 2, "sizes": ["a"]}, "hparams")


def test_escaip_backbone_overrides_from_the_command_line_are_read_as_values():
    from zoo.escaip.model import EScAIPConfig

    cfg = dataclass_from_dict(EScAIPConfig, {"hidden_size": "64", "freequency_list": "[2, 2, 2, 1, 1]"}, "backbone")
    assert cfg.hidden_size == 64 and cfg.freequency_list == [2, 2, 2, 1, 1]
    with pytest.raises(ValueError, match="unknown EScAIP backbone options"):  # ConfigError is a ValueError
        EScAIPConfig.from_dict({"max_neighbors": 20})


def test_checkpoint_of_an_unknown_method_is_one_error(tmp_path, capsys):
    import torch

    from zoo.cli import main

    ckpt = tmp_path / "other.ckpt"
    torch.save({"zoo_model_type": "not-installed", "state_dict": {}, "hyper_parameters": {}}, ckpt)
    assert main(["publish", str(ckpt), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"zoo: error: {ckpt}: no method registers model_type 'not-installed'") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
