"""EScAIP as a TorchSim model (the optional ``[torchsim]`` extra): the same results as the ASE calculator, and a
batched NVE run of different molecules that conserves energy."""

import numpy as np
import pytest
import torch
from ase import units
from ase.build import bulk, molecule

import zoo

ts = pytest.importorskip("torch_sim", reason="the [torchsim] extra (torch-sim-atomistic) is not installed")


def test_torchsim_model_equals_the_calculator(official_repos):
    model = zoo.load(official_repos["gradient"], dtype="float64")
    cu = bulk("Cu", "fcc", a=3.7).repeat((2, 1, 1))
    cu.rattle(0.05, seed=1)
    for images in ([molecule("CH3CH2OH"), molecule("C6H6")], [cu, cu.copy()]):
        state = ts.io.atoms_to_state(images, device=torch.device("cpu"), dtype=torch.float64)
        out = model.as_torchsim_model(compute_stress=bool(images[0].pbc.all()))(state)
        start = 0
        for g, atoms in enumerate(images):
            atoms.calc = model.as_calculator()
            assert float(out["energy"][g]) == pytest.approx(atoms.get_potential_energy(), abs=1e-10)
            np.testing.assert_allclose(out["forces"][start:start + len(atoms)].numpy(), atoms.get_forces(), atol=1e-10)
            if atoms.pbc.all():
                np.testing.assert_allclose(out["stress"][g].numpy(), atoms.get_stress(voigt=False), atol=1e-10)
            start += len(atoms)


def test_batched_nve_conserves_energy(monkeypatch):
    """The molecule default (random weights are not smooth enough: their graph changes make the energy jump)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = zoo.load("escaip-qm9-xtb", dtype="float64").as_torchsim_model()
    images = [molecule(name) for name in ("CH3CH2OH", "C6H6", "CH3COOH")]
    state = ts.io.atoms_to_state(images, device=torch.device("cpu"), dtype=torch.float64)
    init, update = ts.integrators.nve(model, dt=torch.tensor(0.25 * units.fs, dtype=torch.float64),
                                      kT=torch.tensor(300 * units.kB, dtype=torch.float64), seed=0)
    state = init(state)

    def total():
        kinetic = ts.quantities.calc_kinetic_energy(masses=state.masses, momenta=state.momenta,
                                                    system_idx=state.system_idx)
        return (state.energy + kinetic).numpy()

    start, potential = total(), state.energy.numpy().copy()
    for _ in range(40):
        state = update(state)
    # after 10 fs the potential energy moved by 0.13-0.39 eV per molecule, the total by at most 2.1 meV
    assert np.abs(state.energy.numpy() - potential).min() > 0.05
    assert np.abs(total() - start).max() < 5e-3


def _nve(model, images, dtype=torch.float64):
    state = ts.io.atoms_to_state(images, device=torch.device("cpu"), dtype=dtype)
    init, update = ts.integrators.nve(model, dt=torch.tensor(0.5 * units.fs, dtype=dtype),
                                      kT=torch.tensor(300 * units.kB, dtype=dtype), seed=0)
    return init(state), update


def test_skin_gives_a_fresh_search_s_results_each_step(official_repos, searches):
    """Steps of a batched NVE: the candidates kept within the skin give each step the forces of a fresh search
    (float64), and the search runs twice (the first call, then the skin table) while no atom moves half the skin."""
    module = zoo.load(official_repos["gradient"], dtype="float64")
    fresh = module.as_torchsim_model(skin=0.0)
    state, update = _nve(module.as_torchsim_model(skin=1.0), [molecule("CH3CH2OH"), molecule("C6H6")])
    for _ in range(6):
        state = update(state)
        out = fresh(state)
        torch.testing.assert_close(state.forces, out["forces"], rtol=0, atol=1e-10)
        torch.testing.assert_close(state.energy, out["energy"], rtol=0, atol=1e-10)
    assert searches.count(6) == 1 and searches.count(5) == 1 + 6, searches  # skin table once; first call; fresh


@pytest.mark.slow
def test_compiled_torchsim_model_equals_eager(monkeypatch):
    """``compile=True``: one compiled graph for the batch, the eager forces (float32 model, 1e-5 eV/Å) each step."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    eager = zoo.load("escaip-qm9-xtb").as_torchsim_model()
    module = zoo.load("escaip-qm9-xtb")
    compiled = module.as_torchsim_model(compile=True)
    graph, calls = module.model._compiled, []
    module.model._compiled = lambda *args: calls.append(len(args[0])) or graph(*args)
    state, update = _nve(compiled, [molecule(name) for name in ("CH3CH2OH", "C6H6", "CH3COOH")])
    for _ in range(4):
        state = update(state)
        out = eager(state)
        torch.testing.assert_close(state.forces, out["forces"], rtol=0, atol=1e-5)
        torch.testing.assert_close(state.energy, out["energy"], rtol=0, atol=1e-5)
    assert calls == [29] * 4  # the first call (NVE's init) measured the slots eagerly, then every step compiled
