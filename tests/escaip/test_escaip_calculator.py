"""The ASE calculator: MD, relaxation, stress, and clear errors for inputs the potential cannot evaluate."""

import numpy as np
import pytest
import torch
from ase import Atoms, units
from ase.build import add_adsorbate, bulk, fcc111, molecule
from ase.calculators.calculator import PropertyNotImplementedError
from ase.calculators.fd import calculate_numerical_stress
from ase.constraints import FixAtoms
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import thermalize_momenta
from ase.optimize import BFGS

import zoo


@pytest.fixture(scope="module")
def gradient_model(official_repos):
    return zoo.load(official_repos["gradient"], dtype="float64")


def test_langevin_md_on_ethanol(gradient_model):
    atoms = molecule("CH3CH2OH")
    atoms.calc = gradient_model.as_calculator()
    thermalize_momenta(atoms, temperature_K=300, rng=np.random.default_rng(0))
    start = atoms.positions.copy()
    energies = []
    dyn = Langevin(atoms, timestep=0.25 * units.fs, temperature_K=300, friction=0.01 / units.fs, fixcm=False,
                   rng=np.random.default_rng(1))
    dyn.attach(lambda: energies.append(atoms.get_potential_energy()))
    dyn.run(20)
    assert len(energies) == 21 and np.all(np.isfinite(energies))
    assert np.abs(atoms.positions - start).max() < 0.5  # nothing flew off
    # the forces are -dE/dx of the same energy (central differences)
    f = atoms.get_forces()
    for i, k in [(0, 0), (3, 2), (8, 1)]:
        plus, minus = atoms.copy(), atoms.copy()
        plus.positions[i, k] += 1e-4
        minus.positions[i, k] -= 1e-4
        plus.calc = minus.calc = atoms.calc
        numeric = -(plus.get_potential_energy() - minus.get_potential_energy()) / 2e-4
        assert numeric == pytest.approx(f[i, k], abs=1e-6)


def test_bfgs_relaxation_of_a_periodic_slab(gradient_model):
    """BFGS drives the energy down on a periodic slab (random weights have no nearby minimum to converge to)."""
    slab = fcc111("Cu", (2, 2, 3), vacuum=6.0, periodic=True)
    add_adsorbate(slab, "O", 1.5, "fcc")
    slab.rattle(0.05, seed=2)
    slab.set_constraint(FixAtoms(indices=[a.index for a in slab if a.tag == 3]))
    slab.calc = gradient_model.as_calculator()
    cell = slab.cell.array.copy()
    energies = []
    opt = BFGS(slab, logfile=None)
    opt.attach(lambda: energies.append(slab.get_potential_energy()))
    opt.run(fmax=0.01, steps=25)
    assert energies[-1] < energies[0] - 0.1
    assert np.isfinite(slab.positions).all() and np.array_equal(slab.cell.array, cell)
    assert np.abs(slab.get_forces()[[a.index for a in slab if a.tag == 3]]).max() == 0  # constraint honoured


def test_stress_matches_numerical_stress(gradient_model):
    atoms = bulk("Cu", "fcc", a=3.7).repeat((2, 1, 1))
    atoms.rattle(0.02, seed=3)
    atoms.calc = gradient_model.as_calculator()
    np.testing.assert_allclose(atoms.get_stress(), calculate_numerical_stress(atoms, eps=1e-5), atol=1e-7)


def test_direct_model_calculator_has_forces_but_no_stress(official_repos):
    atoms = bulk("Cu", "fcc", a=3.61)
    atoms.calc = zoo.load(official_repos["direct"]).as_calculator()
    assert atoms.get_forces().shape == (1, 3)
    with pytest.raises(PropertyNotImplementedError, match="stress"):
        atoms.get_stress()


@pytest.mark.parametrize(
    "atoms, message",
    [
        (Atoms("H2X", positions=[[0, 0, 0], [0.7, 0, 0], [2, 0, 0]]), "atomic number 0 is outside"),
        (Atoms("HOg", positions=[[0, 0, 0], [1.5, 0, 0]]), "atomic number 118 is outside"),
        (Atoms(), "empty input"),
        (Atoms("H2O", positions=[[0, 0, 0], [0, 0, 0], [0, 0.9, 0.1]]), "sit at the same position"),
        (Atoms("H2", positions=[[0, 0, 0], [np.nan, 0, 0]]), "non-finite position"),
    ],
    ids=["element-0", "element-beyond-range", "empty", "overlap", "nan"],
)
def test_bad_input_gives_one_clear_error(gradient_model, atoms, message):
    atoms.calc = gradient_model.as_calculator()
    with pytest.raises(ValueError, match=message):
        atoms.get_potential_energy()


def test_elements_outside_the_training_data_are_refused(official_repos):
    model = zoo.load(official_repos["direct"])
    supported = torch.zeros_like(model.scaling.supported_elements)
    supported[[1, 6, 8]] = True
    model.scaling.set_(supported_elements=supported)
    atoms = molecule("CH3SH")
    atoms.calc = model.as_calculator()
    with pytest.raises(ValueError, match="element.s. S were not in this model's training data; it supports H, C, O"):
        atoms.get_potential_energy()


def _ensemble() -> list[Atoms]:
    images = [molecule(name) for name in ("CH3CH2OH", "C6H6", "CH3COOH", "H2O", "CH3CH2OH")]
    images += [fcc111("Cu", (2, 2, 3), vacuum=6.0, periodic=True), bulk("Cu", "fcc", a=3.7).repeat((2, 1, 1))]
    for seed, atoms in enumerate(images):
        atoms.rattle(0.05, seed=seed)
    return images


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("max_atoms, systems_per_pass", [(4096, [7]), (20, [1, 2, 2, 2]), (10, [1] * 7)])
def test_calculate_many_equals_single_calls(official_repos, dtype, max_atoms, systems_per_pass, monkeypatch):
    model = zoo.load(official_repos["gradient"], dtype=dtype)
    calc = model.as_calculator()
    images = _ensemble()  # 9, 12, 8, 3, 9, 12 and 2 atoms: with max_atoms 10 the 12-atom ones go alone
    passes = []
    predict = model._predict_valid
    monkeypatch.setattr(model, "_predict_valid",
                        lambda batch, **kw: passes.append(len(batch["natoms"])) or predict(batch, **kw))
    many = calc.calculate_many(images, ["energy", "forces"], max_atoms=max_atoms)
    assert passes == systems_per_pass
    tolerance = 1e-5 if dtype == "float32" else 1e-10
    for atoms, result in zip(images, many):
        atoms.calc = model.as_calculator()
        assert result["energy"] == pytest.approx(atoms.get_potential_energy(), abs=tolerance)
        np.testing.assert_allclose(result["forces"], atoms.get_forces(), rtol=0, atol=tolerance)
        assert result["forces"].dtype == np.float64 and result["forces"].shape == (len(atoms), 3)
    periodic = images[-2:]
    with_stress = calc.calculate_many(periodic, ["energy", "forces", "stress"])
    for atoms, result in zip(periodic, with_stress):
        np.testing.assert_allclose(result["stress"], atoms.get_stress(), rtol=0, atol=tolerance)
    with pytest.raises(PropertyNotImplementedError, match="fully periodic"):
        calc.calculate_many(images, ["energy", "stress"])


def test_calculate_many_names_the_bad_structure(gradient_model):
    images = _ensemble()
    images[3] = Atoms("H2", positions=[[0, 0, 0], [np.nan, 0, 0]])
    with pytest.raises(ValueError, match="non-finite position"):
        gradient_model.as_calculator().calculate_many(images)
    images[3] = Atoms("H2O", positions=[[0, 0, 0], [0, 0, 0], [0, 0.9, 0.1]])
    with pytest.raises(ValueError, match="atoms 0 and 1 of system 3 sit at the same position"):
        gradient_model.as_calculator().calculate_many(images)
