"""Shared EScAIP test fixtures: the official reference fixtures and the tiny official models as zoo repos."""

from pathlib import Path

import numpy as np
import pytest
import torch
from escaip_testdata import FIXTURES


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def inputs() -> dict:
    data = np.load(FIXTURES / "inputs.npz")
    return {
        "pos": torch.tensor(data["positions"]),
        "atomic_numbers": torch.tensor(data["atomic_numbers"]),
        "cell": torch.tensor(data["cell"]),
        "pbc": torch.tensor(data["pbc"]),
        "natoms": torch.tensor(data["natoms"]),
    }


@pytest.fixture(scope="session")
def official_repos(tmp_path_factory) -> dict[str, Path]:
    """The two official tiny models converted (state dict + JSON config) into zoo repo folders."""
    from zoo.escaip.convert import convert_state_dict

    root = tmp_path_factory.mktemp("escaip_repos")
    out = {}
    for variant in ("direct", "gradient"):
        out[variant] = root / variant
        convert_state_dict(FIXTURES / f"{variant}_weights.safetensors", FIXTURES / f"{variant}_config.json",
                           out[variant])
    return out


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    """One intra-op thread (and in spawned DDP workers): tiny models on a shared 2-core box run 100x faster."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def emt_data(tmp_path_factory):
    """16 EMT-labelled Langevin MD frames of two metal slabs with adsorbates, made by make-data."""
    from zoo.escaip.make_data import make_data, plan_jobs

    out = tmp_path_factory.mktemp("emt_data")
    jobs = plan_jobs([], ["cu111_o", "ni111_n"], [600.0], seeds=1, frames=8, slab_frames=8, stride=2,
                     segment_frames=4)
    result = make_data(out, jobs, workers=1)
    assert result == {"frames": 16, "total": 16, "errors": {}}
    return out


@pytest.fixture
def searches(monkeypatch) -> list[int]:
    """Every neighbour search (``graph.candidate_table``) from here on, as its argument count: 6 with a skin,
    5 without."""
    import zoo.escaip.graph as graph

    found = []
    search = graph.candidate_table
    monkeypatch.setattr(graph, "candidate_table", lambda *args: found.append(len(args)) or search(*args))
    return found
