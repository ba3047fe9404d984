"""Shared fixtures for the BitDelta tests: the official tiny-Llama fixture models, deltas and logits."""

import pytest
import torch
from bitdelta_testdata import FIXTURES, hf_model

from zoo.bitdelta.delta import compress


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # the fixtures were made with one thread; also keeps 2-core machines usable


@pytest.fixture(scope="session")
def models():
    """fp32 base, fine-tune A and fine-tune B (never modify these; deep-copy first)."""
    return {name: hf_model(name) for name in ("base", "finetune", "finetune_b")}


@pytest.fixture(scope="session")
def logits():
    from safetensors.torch import load_file

    return load_file(FIXTURES / "logits.safetensors")


@pytest.fixture(scope="session")
def reference():
    from safetensors.torch import load_file

    return load_file(FIXTURES / "reference_tensors.safetensors")


@pytest.fixture(scope="session")
def official():
    from zoo.bitdelta.convert import read_official

    return {name: read_official(FIXTURES / f"{name}.pt")
            for name in ("diff_untrained", "diff_untrained_b", "diff_untrained_bf16", "diff")}


@pytest.fixture(scope="session")
def delta_a(models):
    return compress(models["base"], models["finetune"], base_name=str(FIXTURES / "base"), progress=False)


@pytest.fixture(scope="session")
def delta_b(models):
    return compress(models["base"], models["finetune_b"], base_name=str(FIXTURES / "base"), progress=False)
