import json
import os

import pytest
import torch
from core_testdata import same_weights
from toy import ToyRegressor

import zoo
from zoo.io import WEIGHTS_INDEX_NAME, sha256_file


def test_save_load_round_trip(tmp_path):
    model = ToyRegressor(width=8, depth=3)
    model.save_pretrained(tmp_path)
    loaded = zoo.load(tmp_path)
    assert type(loaded) is ToyRegressor and not loaded.training
    assert same_weights(model, loaded)
    assert loaded.scale.item() == pytest.approx(8**-0.5)  # the unsaved buffer was rebuilt
    x = torch.randn(5, 4)
    assert torch.equal(model(x), loaded(x))
    assert json.loads((tmp_path / "config.json").read_text())["hparams"] == {"width": 8, "depth": 3, "lr": 0.01}


def test_load_builds_on_meta_without_random_init(tmp_path, monkeypatch):
    ToyRegressor().save_pretrained(tmp_path)
    calls = []
    original = torch.Tensor.uniform_

    def spy(self, *args, **kwargs):
        calls.append(self.device.type)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "uniform_", spy)
    zoo.load(tmp_path)
    assert calls == []  # built on meta with nn.init skipped: no random init at all
    ToyRegressor()
    assert "cpu" in calls  # (the spy does see a normal construction)


def test_sharded_round_trip(tmp_path):
    model = ToyRegressor(width=64, depth=4)
    names = model.save_pretrained(tmp_path, max_shard_bytes=10_000)
    assert WEIGHTS_INDEX_NAME in names and len([n for n in names if n.startswith("model-")]) > 1
    assert not (tmp_path / "model.safetensors").exists()
    assert same_weights(model, zoo.load(tmp_path))
    model.save_pretrained(tmp_path)  # back to one file: stale shards are removed
    assert not list(tmp_path.glob("model-*")) and not (tmp_path / WEIGHTS_INDEX_NAME).exists()


def test_strict_loading(tmp_path):
    ToyRegressor(depth=2).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["hparams"]["depth"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(RuntimeError, match="weights do not match ToyRegressor"):
        zoo.load(tmp_path)
    model = ToyRegressor(depth=2)
    again = ToyRegressor.from_state_dict(model.config, model.state_dict())  # zoo.load's build, from memory
    assert same_weights(model, again) and not again.training and again.scale.item() == pytest.approx(16**-0.5)
    with pytest.raises(RuntimeError, match=r"missing \['net.2.weight'\]"):
        ToyRegressor.from_state_dict(model.config, {k: v for k, v in model.state_dict().items() if k != "net.2.weight"})
    with pytest.raises(RuntimeError, match=r"unexpected \['extra'\]"):
        model.load_weights_({**model.state_dict(), "extra": torch.zeros(1)})


def test_dtype_and_device(tmp_path):
    ToyRegressor().save_pretrained(tmp_path)
    model = zoo.load(tmp_path, dtype="bf16", device="cpu")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    with pytest.raises(ValueError, match="unknown dtype"):
        zoo.load(tmp_path, dtype="int3")


def test_load_and_publish_a_lightning_checkpoint(tmp_path):
    """zoo.load and zoo.publish take a Lightning checkpoint of a zoo module as they take a repo."""
    from zoo.errors import InputError

    model = ToyRegressor(width=8)
    ckpt = tmp_path / "run.ckpt"  # what Lightning writes, with the key ZooModule.on_save_checkpoint adds
    torch.save({"zoo_model_type": "toy-mlp", "hyper_parameters": dict(model.hparams),
                "state_dict": model.state_dict()}, ckpt)
    loaded = zoo.load(ckpt)
    assert type(loaded) is ToyRegressor and not loaded.training and same_weights(model, loaded)
    assert loaded.zoo_source == str(ckpt)
    assert {p.dtype for p in ToyRegressor.from_pretrained(str(ckpt), dtype="bf16").parameters()} == {torch.bfloat16}
    with pytest.raises(InputError, match="is a Lightning checkpoint"):
        zoo.load(ckpt, revision="main")
    result = zoo.publish(str(ckpt), tmp_path / "repo")
    assert "model.safetensors" in result["files"] and same_weights(model, zoo.load(tmp_path / "repo"))


def test_pickles_in_a_repo_are_never_executed(tmp_path):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    repo = tmp_path / "repo"
    ToyRegressor().save_pretrained(repo)
    torch.save({"x": Exploit()}, repo / "pytorch_model.bin")
    for name in ("model.pt", "model.ckpt", "model.pkl", "model.pth"):
        (repo / name).write_bytes((repo / "pytorch_model.bin").read_bytes())
    zoo.load(repo)  # loads safetensors only
    (repo / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        zoo.load(repo)
    assert not marker.exists()


def test_bad_paths_and_names(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        zoo.load(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        zoo.load(tmp_path)
    with pytest.raises(zoo.UnknownModelError):
        zoo.load("definitely-not-a-model")


def test_hparams_must_be_plain(tmp_path):
    from omegaconf import OmegaConf

    model = ToyRegressor()
    model.hparams["extra"] = torch.zeros(1)
    with pytest.raises(TypeError, match="hparams.extra is a Tensor"):
        model.save_pretrained(tmp_path)
    model.hparams["extra"] = OmegaConf.create({"a": 1})  # DictConfig becomes a plain dict
    assert model.config["extra"] == {"a": 1}


def test_atomic_save_leaves_no_temp_files(tmp_path):
    ToyRegressor().save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    assert len(sha256_file(tmp_path / "model.safetensors")) == 64
    umask = os.umask(0)
    os.umask(umask)
    for name in ("config.json", "model.safetensors"):  # readable like any file, not mkstemp's 0600
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask


def test_saved_bytes_are_reproducible(tmp_path):
    model = ToyRegressor(width=8)
    hashes = set()
    for i in range(4):
        model.save_pretrained(tmp_path / str(i))
        hashes.add(sha256_file(tmp_path / str(i) / "model.safetensors"))
    assert len(hashes) == 1  # pins depend on it


def test_safetensors_writer_matches_the_library(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file

    from zoo.io import write_safetensors

    tensors = {
        "a.f32": torch.randn(3, 5), "b.bf16": torch.randn(7).bfloat16(), "c.i64": torch.arange(4),
        "d.bool": torch.tensor([True, False, True]), "e.u8": torch.arange(5, dtype=torch.uint8),
        "f.f16": torch.randn(2, 2).half(), "g.empty": torch.zeros(0, 3), "h.i32": torch.tensor([-1, 2**31 - 1]),
    }
    meta = {"format": "pt", "zeta": "1", "alpha": "2"}
    write_safetensors(tensors, tmp_path / "x.safetensors", meta)
    loaded = load_file(str(tmp_path / "x.safetensors"))
    assert loaded.keys() == tensors.keys()
    for k, t in tensors.items():
        assert loaded[k].dtype == t.dtype and torch.equal(loaded[k], t)
    with safe_open(str(tmp_path / "x.safetensors"), "pt") as f:
        assert f.metadata() == meta
    write_safetensors(dict(reversed(tensors.items())), tmp_path / "y.safetensors", dict(reversed(meta.items())))
    assert (tmp_path / "x.safetensors").read_bytes() == (tmp_path / "y.safetensors").read_bytes()
