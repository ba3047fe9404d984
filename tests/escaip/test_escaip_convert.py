"""Converting official checkpoints: fairchem inference pickle (allow-listed, no fairchem import) and state dicts."""

import pickle
import sys

import numpy as np
import pytest
import torch

import zoo
from zoo.cli import main as zoo_main
from zoo.errors import InputError


@pytest.mark.parametrize("ema", [False, True])
def test_inference_checkpoint_gives_postprocessed_outputs(fixture_dir, inputs, tmp_path, ema):
    args = ["convert", "escaip", str(fixture_dir / "direct_mlip_inference_checkpoint.pt"), "--out", str(tmp_path)]
    assert zoo_main(args + (["--ema"] if ema else [])) == 0
    assert "fairchem" not in sys.modules  # the pickle was read without importing fairchem
    model = zoo.load(tmp_path)
    ref = np.load(fixture_dir / "direct_postprocessed_outputs.npz")
    out = model.predict(inputs)
    assert out["energy"].dtype == torch.float64
    # energy = raw * 1.5 + 0.25 + sum of element references (float64); forces = raw * 1.5
    np.testing.assert_allclose(out["energy"].numpy(), ref["energy"], atol=1e-4 * 1.5, rtol=0)
    np.testing.assert_allclose(out["forces"].detach().numpy(), ref["forces"], atol=1.5e-5 * np.abs(ref["forces"]).max())
    s = model.scaling
    assert s.energy_mean.item() == ref["energy_normalizer_mean"] and s.energy_rmsd.item() == ref["energy_normalizer_rmsd"]
    assert s.forces_rmsd.item() == ref["forces_normalizer_rmsd"]
    np.testing.assert_array_equal(s.element_references.numpy(), ref["element_references"])
    # the float64 references survive a dtype cast of the whole module
    assert zoo.load(tmp_path, dtype="float32").scaling.element_references.dtype == torch.float64


def test_state_dict_and_config(fixture_dir, inputs, official_repos):
    ref = np.load(fixture_dir / "gradient_outputs_f32.npz")
    model = zoo.load(official_repos["gradient"])
    assert type(model).__name__ == "EScAIPModule" and model.model.gradient
    assert all(not p.is_meta for p in model.parameters()) and bool(model.scaling.fitted)
    out = model.predict(inputs)  # no normaliser: raw outputs
    np.testing.assert_allclose(out["energy"].numpy(), ref["energy"], atol=1e-4)
    np.testing.assert_allclose(out["forces"].detach().numpy(), ref["forces"], atol=1e-5)
    np.testing.assert_allclose(out["stress"].detach().numpy(), ref["stress"], atol=1e-6)
    # a .pt state dict (torch.save) converts the same way
    from safetensors.torch import load_file

    pt = official_repos["gradient"].parent / "weights.pt"
    torch.save(load_file(str(fixture_dir / "gradient_weights.safetensors")), pt)
    out_dir = official_repos["gradient"].parent / "from_pt"
    assert zoo_main(["convert", "escaip", str(pt), "--config", str(fixture_dir / "gradient_config.json"),
                     "--out", str(out_dir)]) == 0
    again = zoo.load(out_dir).predict(inputs)
    assert torch.equal(again["energy"], out["energy"])


def test_unsafe_pickles_and_mismatches_are_refused(fixture_dir, tmp_path):
    from zoo.escaip.convert import convert_checkpoint, convert_state_dict

    class Evil:
        def __reduce__(self):
            return (print, ("this must never run",))

    bad = tmp_path / "evil.pt"
    with open(bad, "wb") as f:
        pickle.dump({"model_config": Evil()}, f, protocol=2)
    with pytest.raises(InputError, match="names print, which a fairchem inference checkpoint never holds"):
        convert_checkpoint(bad, tmp_path / "out")
    plain = tmp_path / "plain.pt"
    torch.save({"a": torch.zeros(1)}, plain)
    with pytest.raises(ValueError, match="not a fairchem MLIPInferenceCheckpoint"):
        convert_checkpoint(plain, tmp_path / "out")
    # the direct weights do not fit the gradient config
    with pytest.raises(ValueError, match="does not match its config"):
        convert_state_dict(fixture_dir / "direct_weights.safetensors", fixture_dir / "gradient_config.json",
                           tmp_path / "out")
