"""The inference fast paths change no result: the edge stream worked on in chunks of centre atoms."""

import numpy as np
import pytest
import torch
from ase.build import bulk, molecule

import zoo
import zoo.escaip.model as escaip_model
from zoo.escaip.data import atoms_to_batch


@pytest.mark.parametrize("variant", ["direct", "gradient"])
def test_chunked_edge_stream_equals_one_chunk(official_repos, variant, monkeypatch):
    model = zoo.load(official_repos[variant], dtype="float64")
    cu = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))
    cu.rattle(0.05, seed=0)
    batch = atoms_to_batch([molecule("CH3CH2OH"), cu, molecule("C6H6")])
    stress = True if variant == "gradient" else None
    whole = model.predict(batch, stress=stress)
    sizes = []
    chunks = escaip_model.row_chunks
    monkeypatch.setattr(escaip_model, "row_chunks", lambda *a: sizes.append(len(chunks(*a))) or chunks(*a))
    monkeypatch.setattr(escaip_model, "EDGE_CHUNK_ELEMENTS", 1)  # one atom per chunk
    chunked = model.predict(batch, stress=stress)
    assert sizes[-1] == len(batch["pos"]) == 53
    for key in whole:
        torch.testing.assert_close(chunked[key], whole[key], rtol=0, atol=1e-10)


@pytest.mark.parametrize("variant", ["direct", "gradient"])
def test_skin_reuses_the_candidates_with_a_fresh_search_s_results(official_repos, variant, monkeypatch):
    """Positions drifting step by step: while no atom has moved half the skin the calculator skips the search,
    with the results of a fresh search each step (the periodic slab: atoms cross the cell's edge)."""
    import zoo.escaip.calculator as calculator

    model = zoo.load(official_repos[variant], dtype="float64")
    slab = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))
    for atoms in (molecule("CH3CH2OH"), slab):
        searches = []
        search = calculator.candidate_table
        monkeypatch.setattr(calculator, "candidate_table", lambda *a: searches.append(len(a)) or search(*a))
        reused, fresh = model.as_calculator(skin=1.0), model.as_calculator(skin=0.0)
        rng = np.random.default_rng(0)
        velocity = rng.normal(scale=0.06, size=(len(atoms), 3))
        for step in range(8):
            atoms.positions += velocity + rng.normal(scale=0.01, size=velocity.shape)
            atoms.calc = reused
            forces, energy = atoms.get_forces(), atoms.get_potential_energy()
            atoms.calc = fresh
            np.testing.assert_allclose(forces, atoms.get_forces(), rtol=0, atol=1e-10)
            assert energy == pytest.approx(atoms.get_potential_energy(), abs=1e-10)
        # the fresh calculator searched 8 times; the reusing one at its first step without the skin, then with it
        # at its second and after every ~0.5 Å of drift of some atom (that step's table taken from the new one)
        rebuilds = searches.count(6)
        assert searches.count(5) == 8 + 1 and 2 <= rebuilds <= 4, rebuilds
        monkeypatch.undo()


@pytest.mark.slow
def test_compiled_inference_equals_eager(official_repos):
    """torch.compile with every row padded to the slots the system needs: the forces of the eager path (fp32,
    1e-5 eV/Å) over a few MD-like steps of a molecule and a periodic slab. A system's first step runs eagerly
    (it measures the slots), the later ones through one compiled graph: no graph break splits it (a break inside
    torch.func.grad runs the whole pass eagerly, several times slower)."""
    from torch._dynamo.utils import counters

    counters.clear()
    eager = zoo.load(official_repos["gradient"])
    compiled_model = zoo.load(official_repos["gradient"])
    compiled = compiled_model.as_calculator(compile=True)
    model = compiled_model.model
    calls = []
    graph = model._compiled
    model._compiled = lambda *args: calls.append(args[-1]) or graph(*args)
    slab = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 1))
    slab.rattle(0.05, seed=0)
    rng = np.random.default_rng(0)
    for atoms in (molecule("CH3CH2OH"), slab):
        for step in range(3):
            atoms.positions += rng.normal(scale=0.02, size=atoms.positions.shape)
            atoms.calc = eager.as_calculator()
            forces, energy = atoms.get_forces(), atoms.get_potential_energy()
            atoms.calc = compiled
            np.testing.assert_allclose(atoms.get_forces(), forces, rtol=0, atol=1e-5)
            assert atoms.get_potential_energy() == pytest.approx(energy, abs=1e-5)
    # ethanol's 9 atoms keep at most 9 slots (its table's width); the slab's slots stay within knn_pad_size
    assert calls[:2] == [9, 9] and len(calls) == 4 and calls[2] == calls[3] <= model.cfg.knn_pad_size, calls
    assert not counters["graph_break"], dict(counters["graph_break"])
