"""BitDelta works on any zoo model: a delta of each method's embedded model against a perturbed copy round-trips
through `zoo.load` (the base it names is rebuilt exactly, fingerprint included) and gives the compressed fine-tune's
outputs (issue 28: escaip-tiny-emt failed its fingerprint check, llama-bytes-3m loaded with a bf16 RoPE table)."""

import copy

import numpy as np
import pytest
import torch

import zoo
from zoo.bitdelta.delta import compress, linear_weight
from zoo.bitdelta.module import BitDeltaModule


def _perturbed(model, scale=1e-2):
    finetune = copy.deepcopy(model)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in finetune.parameters():
            p.add_((scale * torch.randn(p.shape, generator=g)).to(p.dtype))
    return finetune.eval()


def _reconstruct(base, finetune, delta):
    """The compressed fine-tune by definition (official load_diff): W_base + (α·sign(Δ) in fp32, cast), every other
    tensor from the fine-tune."""
    expected = copy.deepcopy(finetune)
    with torch.no_grad():
        for name in delta.modules:
            w_base = linear_weight(base.get_submodule(name))
            sign = torch.where(linear_weight(finetune.get_submodule(name)) - w_base >= 0, 1.0, -1.0)
            linear_weight(expected.get_submodule(name)).copy_(w_base + (delta.scales[name] * sign).to(w_base.dtype))
    return expected


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
    finetune = _perturbed(base)
    delta = compress(base, finetune, select="*", base_name=name, progress=False)
    delta.save(tmp_path / "delta")
    loaded = zoo.load(tmp_path / "delta")
    assert isinstance(loaded, BitDeltaModule) and type(loaded.model) is type(base) and not loaded.training
    got = _outputs(name, loaded.model)
    assert torch.equal(got, _outputs(name, _reconstruct(base, finetune, delta)))
    assert not torch.allclose(got, _outputs(name, base))  # the delta is applied, not the base alone
