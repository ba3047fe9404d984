"""BitDelta works on any zoo model: a delta of each method's embedded model against a perturbed copy, compressed by
`zoo bitdelta compress` with its default selection, round-trips through `zoo.load` (the base it names is rebuilt
exactly, fingerprint included) and answers the base's task API with the compressed fine-tune's outputs (issue 28:
escaip-tiny-emt failed its fingerprint check, llama-bytes-3m loaded with a bf16 RoPE table; issue 44: a delta of a
non-LM model needed --select '*' and had no as_calculator())."""

import chess
import numpy as np
import pytest
import torch
from bitdelta_testdata import perturbed, reconstruct

import zoo
from zoo.bitdelta.delta import BitDelta
from zoo.bitdelta.module import BitDeltaModule
from zoo.cli import main
from zoo.module import ZooModule


def _outputs(name: str, model) -> torch.Tensor:
    """A deterministic output of each method's model through its task API, flattened to one float64 tensor."""
    if name.startswith("chess"):
        board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3")
        return torch.from_numpy(model.engine().analyse(board).win_probs)
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
def test_a_delta_of_each_methods_model_works_as_that_model(name, tmp_path, capsys):
    base = zoo.load(name)
    finetune = perturbed(base)
    finetune.save_pretrained(tmp_path / "finetune")
    assert main(["bitdelta", "compress", "--base", name, "--finetune", str(tmp_path / "finetune"),
                 "--out", str(tmp_path / "delta")]) == 0, capsys.readouterr().err
    delta = BitDelta.load(tmp_path / "delta")
    loaded = zoo.load(tmp_path / "delta")
    assert isinstance(loaded, BitDeltaModule) and type(loaded.model) is type(base) and not loaded.training
    got = _outputs(name, loaded)
    assert torch.equal(got, _outputs(name, reconstruct(base, finetune, delta)))
    assert not torch.allclose(got, _outputs(name, base))  # the delta is applied, not the base alone
    if name == "llama-bytes-3m":  # the official rule: attention and MLP projections; embeddings and head carried
        assert len(delta.shapes) == 28 and "model.lm_head.weight" in delta.params
        assert loaded.generate("To be", 12) == reconstruct(base, finetune, delta).generate("To be", 12)
    else:  # no layer the official rule names: every Linear layer
        assert len(delta.shapes) == sum(isinstance(m, torch.nn.Linear) for m in base.modules())
    # functions that take a model of the base's kind find its parts too (zoo escaip symmetry reads model.scaling)
    # what the base's class adds to ZooModule (methods, properties) and its parts
    own = {n for n in [*dir(type(base)), *dict(base.named_children())] if not n.startswith("_") and not n.endswith("_")
           and not hasattr(ZooModule, n)} - {"model", "generate"}  # those two are the delta's own
    assert set(own) <= set(dir(loaded))
    for name in own:
        value, expected = getattr(loaded, name), getattr(loaded.model, name)
        assert value is expected or not isinstance(value, (torch.Tensor, torch.nn.Module)) and value == expected, name
    with pytest.raises(AttributeError, match="no attribute 'calculator'"):
        loaded.calculator  # noqa: B018
