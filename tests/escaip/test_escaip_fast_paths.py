"""The inference fast paths change no result: the edge stream worked on in chunks of centre atoms."""

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
