"""BitDelta works on any zoo model: a delta of each method's embedded model against a perturbed copy round-trips
through `zoo.load` (the base it names is rebuilt exactly, fingerprint included) and gives the compressed fine-tune's
outputs (issue 28: escaip-tiny-emt failed its fingerprint check, llama-bytes-3m loaded with a bf16 RoPE table)."""

import numpy as np
import pytest
import torch
from bitdelta_testdata import perturbed, reconstruct

import zoo
from zoo.bitdelta.delta import compress
from zoo.bitdelta.module import BitDeltaModule


def _outputs(name: str, model) -> torch.Tensor:
    """A deterministic output of each method's model, flattened to one float64 tensor."""
    if name.startswith("chess"):
        sequences = torch.randint(0, 31, (4, 79), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            return model(sequences).double().flatten()
    if name.startswith("escaip"):
        from ase.build import fcc111

        slab = fcc111("Cu", (2, 2, 3), vacuum=6.0, periodic=True)
        slab.rattle(0.05, seed=1)
        slab.calc = model.as_calculator()
        return torch.from_numpy(np.append(slab.get_forces().ravel(), slab.get_potential_energy()))
    if name.startswith("rcg"):
        images = torch.rand(2, 3, 28, 28, generator=torch.Generator().manual_seed(1))
        samples = model.sample(2, rdm_steps=4, steps=2, seed=0)
        return torch.cat([model.encode(images).flatten(), samples.flatten()]).double()
    ids = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(ids).logits.double().flatten()


@pytest.mark.parametrize("name", ["chess-small-av", "escaip-tiny-emt", "rcg-fashionmnist", "llama-bytes-3m"])
def test_a_delta_of_each_methods_model_round_trips(name, tmp_path):
    base = zoo.load(name)
    finetune = perturbed(base)
    delta = compress(base, finetune, select="*", base_name=name, progress=False)
    delta.save(tmp_path / "delta")
    loaded = zoo.load(tmp_path / "delta")
    assert isinstance(loaded, BitDeltaModule) and type(loaded.model) is type(base) and not loaded.training
    got = _outputs(name, loaded.model)
    assert torch.equal(got, _outputs(name, reconstruct(base, finetune, delta)))
    assert not torch.allclose(got, _outputs(name, base))  # the delta is applied, not the base alone
