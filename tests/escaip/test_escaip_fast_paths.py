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
    plans = []
    plan = escaip_model.width_plan
    monkeypatch.setattr(escaip_model, "width_plan", lambda *a: plans.append(plan(*a)) or plans[-1])
    monkeypatch.setattr(escaip_model, "EDGE_CHUNK_ELEMENTS", 1)  # one atom per chunk
    chunked = model.predict(batch, stress=stress)
    assert len(plans[-1]) == len(batch["pos"]) == 53
    for key in whole:
        torch.testing.assert_close(chunked[key], whole[key], rtol=0, atol=1e-10)


@pytest.mark.parametrize("variant", ["direct", "gradient"])
def test_skin_reuses_the_candidates_with_a_fresh_search_s_results(official_repos, variant, searches):
    """Positions drifting step by step: while no atom has moved half the skin the calculator skips the search,
    with the results of a fresh search each step (the periodic slab: atoms cross the cell's edge)."""
    model = zoo.load(official_repos[variant], dtype="float64")
    slab = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 2))
    for atoms in (molecule("CH3CH2OH"), slab):
        searches.clear()
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


def test_skin_sees_positions_updated_in_place(official_repos, searches):
    """A caller that moves its atoms in the tensor it passed (TorchSim's state) still gets a new search once an
    atom has moved more than half the skin."""
    from zoo.escaip.graph import SkinCandidates

    batch = atoms_to_batch([molecule("CH3CH2OH")])
    candidates = SkinCandidates(zoo.load(official_repos["gradient"]).cfg.graph, skin=1.0, first_call=True)
    candidates(batch)
    searches.clear()
    batch["pos"][0, 0] += 0.3  # within half the skin: the table serves
    candidates(batch)
    batch["pos"][0, 0] += 0.3  # 0.6 Å from where the table was built
    candidates(batch)
    assert searches == [6]


@pytest.mark.parametrize("variant", ["direct", "gradient"])
def test_radial_tables_follow_the_network(official_repos, variant, monkeypatch):
    """The compiled path's cubic tables of each layer's function of the distance: values and slopes as the layers
    give them, forces and energies through the whole model as the network's (float64, eager, so no compile);
    rebuilt when the weights change, and not built where they would be too large."""
    module = zoo.load(official_repos[variant], dtype="float64")
    model = module.model
    monkeypatch.setattr(escaip_model, "check_cpp_toolchain", lambda: None)  # nothing compiles: no g++ needed
    model.compile_inference()
    tables = model._radial_tables()
    assert model._radial_tables() is tables  # cached while the weights stay the same
    d = torch.linspace(0, model.cfg.max_radius, 3001, dtype=torch.float64)[:-1].requires_grad_(True)
    for layer, table in zip(model.backbone.edge_embeddings(), tables):
        exact = layer.distance_share(escaip_model.distance_expansion(d, model.cfg))
        approx = escaip_model.radial_lookup(table, d, layer.radial_step)
        torch.testing.assert_close(approx, exact, rtol=0, atol=1e-9 * exact.abs().max().item())
        slope, exact_slope = (torch.autograd.grad(y.sum(), d)[0] for y in (approx, exact))
        torch.testing.assert_close(slope, exact_slope, rtol=0, atol=1e-6 * exact_slope.abs().max().item())

    cu = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 1))
    cu.rattle(0.05, seed=0)
    batch = atoms_to_batch([molecule("CH3CH2OH"), cu])
    args = (batch["pos"], batch["cell"], batch["atomic_numbers"],
            escaip_model.candidate_table(batch["pos"], batch["cell"], batch["pbc"], batch["natoms"], model.cfg.graph),
            2)
    if model.gradient:
        def forces(radial):
            pos = args[0].clone().requires_grad_(True)
            energy, _ = model._strained_energy(pos, None, *args[1:], radial=radial)
            return energy, -torch.autograd.grad(energy, pos)[0]
    else:
        def forces(radial):
            out = model._outputs(*args, radial=radial)
            return out["energy"].sum(), out["forces"]
    (energy, force), (energy_t, force_t) = forces(None), forces(tables)
    torch.testing.assert_close(energy_t, energy, rtol=0, atol=1e-8)
    torch.testing.assert_close(force_t, force, rtol=0, atol=1e-7)

    with torch.no_grad():
        model.backbone.edge_embeddings()[1].edge_distance_embedding[0].weight.mul_(1.5)
    rebuilt = model._radial_tables()
    assert rebuilt is not tables and torch.equal(rebuilt[0], tables[0]) and not torch.equal(rebuilt[1], tables[1])
    monkeypatch.setattr(escaip_model, "RADIAL_TABLES_MAX_BYTES", 1024)
    assert model._radial_tables() is None


def test_compiled_path_belongs_to_the_calculator_that_asked(official_repos, monkeypatch):
    """``as_calculator(compile=True)`` compiles that calculator's calls (single and many), not every later call
    on the same model: a plain calculator, ``predict`` and ``predict_many`` beside it stay eager."""
    module = zoo.load(official_repos["gradient"])
    model = module.model
    monkeypatch.setattr(escaip_model, "check_cpp_toolchain", lambda: None)  # nothing compiles: no g++ needed
    compiled_atoms = []
    monkeypatch.setattr(model, "_compiled_inference",  # records, then gives the eager results (nothing compiles)
                        lambda *args: compiled_atoms.append(len(args[0])) or model._eager(*args))
    compiled, plain = module.as_calculator(compile=True), module.as_calculator()
    ethanol, water = molecule("CH3CH2OH"), molecule("H2O")
    ethanol.calc = compiled
    ethanol.get_forces()
    water.calc = plain
    water.get_forces()
    module.predict(atoms_to_batch([water]))
    plain.calculate_many([water, ethanol])
    assert compiled_atoms == [9]
    compiled.calculate_many([water, ethanol])
    assert compiled_atoms == [9, 12]


def test_compile_without_a_cpp_toolchain_says_what_to_install(official_repos, monkeypatch, tmp_path):
    module = zoo.load(official_repos["gradient"])
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-g++"))
    with pytest.raises(RuntimeError, match=r"needs a C\+\+ compiler \(.*no-such-g\+\+; set CXX.*apt-get install g\+\+"):
        module.as_calculator(compile=True)
    monkeypatch.delenv("CXX")
    monkeypatch.setattr(escaip_model.sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    with pytest.raises(RuntimeError, match=r"Python's headers \(.*Python\.h\).*python3-dev"):
        module.as_calculator(compile=True)
    assert module.as_calculator().get_forces(molecule("H2O")).shape == (3, 3)  # the eager path needs neither


@pytest.mark.slow
def test_compiled_inference_equals_eager(official_repos):
    """torch.compile with every row padded to the slots the system needs, and radial tables: the forces of the
    eager path (fp32, 1e-5 eV/Å; the slab's stress 1e-6 eV/Å^3) over a few MD-like steps of a molecule and a
    periodic slab. A system's first step runs eagerly (it measures the slots), the later ones through one compiled
    graph: no graph break splits it (a break inside torch.func.grad runs the whole pass eagerly, several times
    slower)."""
    from torch._dynamo.utils import counters

    counters.clear()
    eager = zoo.load(official_repos["gradient"])
    compiled_model = zoo.load(official_repos["gradient"])
    compiled = compiled_model.as_calculator(compile=True)
    model = compiled_model.model
    model.compile_inference()
    calls = []
    graph = model._compiled
    model._compiled = lambda *args: calls.append(args[6]) or graph(*args)  # (..., slots, radial tables)
    slab = bulk("Cu", "fcc", a=3.61, cubic=True).repeat((2, 2, 1))
    slab.rattle(0.05, seed=0)
    rng = np.random.default_rng(0)
    for atoms in (molecule("CH3CH2OH"), slab):
        for step in range(3):
            atoms.positions += rng.normal(scale=0.02, size=atoms.positions.shape)
            atoms.calc = eager.as_calculator()
            forces, energy = atoms.get_forces(), atoms.get_potential_energy()
            stress = atoms.get_stress() if atoms.pbc.all() else None
            atoms.calc = compiled
            np.testing.assert_allclose(atoms.get_forces(), forces, rtol=0, atol=1e-5)
            assert atoms.get_potential_energy() == pytest.approx(energy, abs=1e-5)
            if stress is not None:  # a second graph: the strain's gradient too
                np.testing.assert_allclose(atoms.get_stress(), stress, rtol=0, atol=1e-6)
    # ethanol's 9 atoms keep at most 9 slots (its table's width); the slab's (forces, then stress: 5 compiled
    # calls after its first, eager one) stay within knn_pad_size
    slab_slots = set(calls[2:])
    assert calls[:2] == [9, 9] and len(calls) == 7 and len(slab_slots) == 1, calls
    assert max(slab_slots) <= model.cfg.knn_pad_size
    assert not counters["graph_break"], dict(counters["graph_break"])


@pytest.mark.slow
def test_compiled_models_of_other_layer_kinds_keep_their_own_graphs(official_repos):
    """Two models in one process, the same tensors but another activation: the compiled code is shared by every
    model, so its guards must tell them apart (without dynamo's module guards the second ran the first's graph)."""
    from zoo.escaip.module import EScAIPModule

    first = zoo.load(official_repos["gradient"])
    backbone = dict(first.hparams["backbone"])
    backbone["activation"] = "squared_relu" if backbone["activation"] != "squared_relu" else "gelu"
    second = EScAIPModule(backbone=backbone, heads=first.hparams["heads"]).eval()
    second.load_state_dict(first.state_dict())
    for module in (first, second):
        atoms = molecule("CH3CH2OH")
        atoms.calc = module.as_calculator(compile=True)
        for step in range(3):  # the first call measures the slots, the later ones run compiled
            atoms.rattle(0.02, seed=step)
            forces = atoms.get_forces()
        atoms.calc = module.as_calculator()
        np.testing.assert_allclose(forces, atoms.get_forces(), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_compiled_path_compiles_each_system_past_dynamo_s_recompile_limit(official_repos, monkeypatch):
    """Every system compiles its own graph, all of one function: past dynamo's recompile limit (8 by default, 1
    here) a new system would run eagerly for the rest of the process. The compiled path raises the limit for its own
    calls (``COMPILED_SYSTEMS``) and leaves the process's setting alone."""
    import torch._dynamo.config
    from torch._dynamo.utils import counters

    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)
    counters.clear()
    calc = zoo.load(official_repos["gradient"]).as_calculator(compile=True)
    for name in ("H2O", "NH3", "CH3OH"):  # 3, 4 and 6 atoms: three graphs (no other test compiles these)
        atoms = molecule(name)
        atoms.calc = calc
        for step in range(3):  # the first call measures the slots (eager), the second compiles, the third reuses
            atoms.positions[0] += 0.01
            atoms.get_forces()
    assert counters["stats"]["unique_graphs"] == 3, dict(counters["stats"])
    assert torch._dynamo.config.recompile_limit == 1
