"""The neighbour graph: identical to the official biknn graph, linear search, batching, clear errors."""

import math

import numpy as np
import pytest
import torch
from escaip_testdata import official_config

from zoo.escaip.graph import GraphConfig, _search, build_graph

GRAPH_KEYS = ("max_radius", "knn_k", "knn_pad_size", "knn_soft", "knn_sigmoid_scale", "knn_lse_scale",
              "knn_use_low_mem", "use_pbc")


def graph_config(variant="direct", **overrides) -> GraphConfig:
    kwargs = {k: official_config(variant)["backbone_kwargs"][k] for k in GRAPH_KEYS}
    return GraphConfig(**{**kwargs, **overrides})


def rows_as_sets(index, mask, image, env, disp):
    """Per atom: {(neighbour, image): (env, disp)} over real slots."""
    out = []
    for i in range(len(index)):
        out.append({(int(index[i, s]), tuple(int(v) for v in image[i, s])): (float(env[i, s]), np.asarray(disp[i, s]))
                    for s in range(index.shape[1]) if mask[i, s]})
    return out


def assert_same_rows(mine, ref, atol=1e-5):
    assert len(mine) == len(ref)
    for i, (a, b) in enumerate(zip(mine, ref)):
        assert set(a) == set(b), f"atom {i}: extra {set(a) - set(b)}, missing {set(b) - set(a)}"
        for key in a:
            assert abs(a[key][0] - b[key][0]) <= atol, (i, key)
            np.testing.assert_allclose(a[key][1], b[key][1], atol=atol)


@pytest.mark.parametrize("variant", ["direct", "gradient"])
@pytest.mark.parametrize("search", ["cell_list", "all_pairs"])
def test_neighbour_lists_match_official(fixture_dir, inputs, variant, search):
    ref = np.load(fixture_dir / f"{variant}_neighbors.npz")
    g = build_graph(inputs["pos"].float(), inputs["cell"].float(), inputs["pbc"], inputs["natoms"],
                    graph_config(variant, neighbor_search=search))
    assert g.index.shape == ref["nbr_index"].shape  # (N, knn_pad_size)
    assert torch.equal(g.index[:, 0], torch.arange(len(g.index)))  # slot 0: the self-loop
    assert (g.env[:, 0] == 0).all()
    mine = rows_as_sets(g.index, g.mask, g.image, g.env, g.disp)
    official = rows_as_sets(ref["nbr_index"], ref["nbr_mask"], ref["nbr_image"], ref["nbr_env"], ref["nbr_disp"])
    assert_same_rows(mine, official)
    # slots are ordered by the envelope value, padding last
    env = torch.where(g.mask, g.env, torch.full_like(g.env, math.inf))
    assert (env[:, 1:] >= env[:, :-1]).all()
    assert g.mask.sum().item() == int(ref["nbr_mask"].sum())
    assert (g.mask.sum(1)[-1] == 13)  # cu_bulk_prim: the soft kNN keeps 13 > k = 10


def random_system(seed, n, cell, pbc):
    rng = np.random.default_rng(seed)
    cell = np.asarray(cell, dtype=float)
    # a jittered lattice keeps atoms apart like a real solid
    m = math.ceil(n ** (1 / 3))
    grid = np.stack(np.meshgrid(*[np.arange(m)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n]
    frac = (grid + 0.5 + rng.uniform(-0.25, 0.25, (n, 3))) / m
    pos = frac @ cell + rng.normal(scale=0.02, size=(n, 3))
    return pos, cell, np.asarray(pbc)


def batch_of(systems):
    pos = torch.tensor(np.concatenate([s[0] for s in systems]))
    cell = torch.tensor(np.stack([s[1] for s in systems]))
    pbc = torch.tensor(np.stack([s[2] for s in systems]))
    natoms = torch.tensor([len(s[0]) for s in systems])
    return pos, cell, pbc, natoms


@pytest.mark.parametrize("soft", [True, False], ids=["soft", "hard"])
def test_cell_list_equals_all_pairs_on_varied_systems(soft):
    systems = [
        random_system(0, 40, [[9.0, 0, 0], [2.5, 8.0, 0], [1.0, 1.5, 8.5]], [True] * 3),  # triclinic bulk
        random_system(1, 30, [[7.0, 0, 0], [0, 7.0, 0], [0, 0, 20.0]], [True, True, False]),  # slab-like
        random_system(2, 12, np.eye(3) * 6.0, [False] * 3),  # a molecule, no images
        random_system(3, 2, [[2.0, 0, 0], [0, 2.2, 0], [0.3, 0, 2.1]], [True] * 3),  # tiny cell, many images
    ]
    pos, cell, pbc, natoms = batch_of(systems)
    cfg = dict(max_radius=4.0, knn_k=12, knn_pad_size=40, knn_soft=soft, knn_sigmoid_scale=0.2,
               knn_lse_scale=0.1, knn_use_low_mem=True, use_pbc=True)
    fast = build_graph(pos, cell, pbc, natoms, GraphConfig(**cfg, neighbor_search="cell_list"))
    slow = build_graph(pos, cell, pbc, natoms, GraphConfig(**cfg, neighbor_search="all_pairs"))
    assert_same_rows(rows_as_sets(fast.index, fast.mask, fast.image, fast.env, fast.disp),
                     rows_as_sets(slow.index, slow.mask, slow.image, slow.env, slow.disp), atol=1e-9)
    # batching: every system alone gives the same rows (indices shifted by the system's offset)
    offset = 0
    alone_rows = []
    for s in systems:
        p, c, b, n = batch_of([s])
        g = build_graph(p, c, b, n, GraphConfig(**cfg))
        alone_rows += [{(j + offset, img): v for (j, img), v in row.items()}
                       for row in rows_as_sets(g.index, g.mask, g.image, g.env, g.disp)]
        offset += len(s[0])
    assert_same_rows(rows_as_sets(fast.index, fast.mask, fast.image, fast.env, fast.disp), alone_rows, atol=1e-9)
    # non-periodic directions have no images
    rows_slab = slice(40, 70)
    assert (fast.image[rows_slab][..., 2] == 0).all()
    assert (fast.image[70:82] == 0).all()


def test_search_is_linear_in_atoms():
    """Candidates per atom stay constant as a periodic crystal grows (the all-pairs set grows with N)."""
    from ase.build import bulk

    cfg = GraphConfig(max_radius=6.0, knn_k=30, knn_pad_size=45)
    per_atom = []
    for reps in (3, 5, 7):
        atoms = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(reps)
        pos, cell = torch.tensor(atoms.positions), torch.tensor(atoms.cell.array)[None]
        found = _search(pos, cell, torch.ones(1, 3, dtype=torch.bool), torch.tensor([len(atoms)]), cfg)[0]
        per_atom.append(len(found) / len(atoms))
    assert max(per_atom) / min(per_atom) < 1.05  # every atom sees the same sphere of radius 6 + pi * 0.2
    assert per_atom[0] == pytest.approx(per_atom[-1], rel=1e-6)


def test_overlapping_atoms_and_small_pad_are_clear_errors():
    pos = torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [1.0, 0, 0]])
    args = (torch.zeros(1, 3, 3), torch.zeros(1, 3, dtype=torch.bool), torch.tensor([3]))
    with pytest.raises(ValueError, match="atoms 1 and 2 of system 0 sit at the same position"):
        build_graph(pos, *args, GraphConfig(max_radius=4.0, knn_k=4, knn_pad_size=8))
    from ase.build import bulk

    atoms = bulk("Cu", "fcc", a=3.61)
    with pytest.raises(ValueError, match="raise knn_pad_size"):
        build_graph(torch.tensor(atoms.positions), torch.tensor(atoms.cell.array)[None], torch.ones(1, 3, dtype=torch.bool),
                    torch.tensor([1]), GraphConfig(max_radius=4.5, knn_k=10, knn_pad_size=12))
    with pytest.raises(ValueError, match="zero volume"):
        build_graph(pos[:2], torch.zeros(1, 3, 3), torch.ones(1, 3, dtype=torch.bool), torch.tensor([2]),
                    GraphConfig(max_radius=4.0, knn_k=4, knn_pad_size=8))
