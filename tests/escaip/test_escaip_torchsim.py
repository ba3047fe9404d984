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
