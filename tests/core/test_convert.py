"""zoo.convert: the one safe-unpickling policy for official files, the strict key mapper, single_file."""

import argparse
import dataclasses
import os

import pytest
import torch

from zoo.convert import map_keys, safe_torch_load, single_file
from zoo.errors import ConfigError, DamagedFileError, InputError


@dataclasses.dataclass
class Official:  # a class an official file pickles (fairchem's, say); unknown to torch
    weights: dict


@dataclasses.dataclass
class StandIn:  # the local class that reads it, without importing that package
    weights: dict


def test_a_global_outside_the_allowlist_is_one_error_naming_it(tmp_path):
    for legacy in (False, True):  # zip files are scanned first; legacy ones refused by the unpickler
        path = tmp_path / f"evil{legacy}.pt"
        torch.save({"w": torch.zeros(2), "x": Official({})}, path, _use_new_zipfile_serialization=not legacy)
        with pytest.raises(InputError) as err:
            safe_torch_load(path, [argparse.Namespace], what="an official file")
        message = str(err.value)
        assert len(message.splitlines()) == 1 and str(path) in message
        assert "test_convert.Official, which an official file never holds" in message
        assert "argparse.Namespace are allowed" in message and "re-save it as a plain state dict" in message


def test_an_allow_listed_stand_in_loads(tmp_path):
    path = tmp_path / "official.pt"
    torch.save(Official({"w": torch.arange(3)}), path)
    loaded = safe_torch_load(path, [(StandIn, f"{__name__}.Official")])
    assert type(loaded) is StandIn and torch.equal(loaded.weights["w"], torch.arange(3))


def test_memory_mapped_unless_the_file_is_a_legacy_pickle(tmp_path, monkeypatch):
    mapped = []
    load = torch.load
    monkeypatch.setattr(torch, "load", lambda *args, **kwargs: mapped.append(kwargs["mmap"]) or load(*args, **kwargs))
    for legacy in (False, True):
        torch.save({"w": torch.arange(4.0)}, tmp_path / "w.pt", _use_new_zipfile_serialization=not legacy)
        assert torch.equal(safe_torch_load(tmp_path / "w.pt")["w"], torch.arange(4.0))
    assert mapped == [True, False]


def test_web_pages_and_damaged_files_are_named(tmp_path):
    page = tmp_path / "page.pth"
    page.write_text("\n<!DOCTYPE html><html><title>Google Drive - Virus scan warning</title></html>")
    with pytest.raises(InputError, match=f"{page} is an HTML page, not a checkpoint"):
        safe_torch_load(page)
    path = tmp_path / "cut.pt"
    torch.save({"w": torch.zeros(64)}, path)
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(DamagedFileError, match=f"{path} cannot be read as a checkpoint .*: download it again"):
        safe_torch_load(path)
    with pytest.raises(FileNotFoundError):
        safe_torch_load(tmp_path / "missing.pt")


def test_map_keys_renames_by_rules_and_reports_unused_and_missing_together():
    source = {"enc.w": 1, "enc.b": 2, "head": 3, "ema.decay": 4}
    rules = [("enc.", "encoder."), ("head", "head.weight"), ("ema.decay", None)]
    assert map_keys(source, rules, expected=["encoder.w"]) == {"encoder.w": 1, "encoder.b": 2, "head.weight": 3}
    assert map_keys({"a": 1, "b": 2}, [("a", "x"), ("", "y.")]) == {"x": 1, "y.b": 2}  # first match wins
    with pytest.raises(InputError, match=r"the MoCo file does not fit .*unexpected keys \['extra'\], "
                                         r"missing keys \['encoder.z'\]"):
        map_keys({**source, "extra": 5}, rules, expected=["encoder.z"], what="the MoCo file")


def test_single_file():
    entry = argparse.Namespace(name="chess-9m")
    assert single_file({"9M.zip": "/x/9M.zip"}, entry, "checkpoint zip") == "/x/9M.zip"
    with pytest.raises(ConfigError, match=r"chess-9m: expected one checkpoint zip, got \['a', 'b'\]"):
        single_file({"a": "/a", "b": "/b"}, entry, "checkpoint zip")
