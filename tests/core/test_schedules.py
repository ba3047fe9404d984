import math

import pytest
import torch

from zoo.schedules import WarmupCosine, warmup_cosine


def test_warmup_then_cosine_to_the_floor():
    f = WarmupCosine(warmup=4, total=14, min_ratio=0.1)
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert f(9) == pytest.approx(0.1 + 0.9 * 0.5)  # half-way through the decay
    assert f(14) == pytest.approx(0.1) and f(100) == pytest.approx(0.1)  # held at the floor after `total`
    assert WarmupCosine(0, 10)(0) == 1.0 and WarmupCosine(0, 10)(10) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="min_ratio"):
        WarmupCosine(1, 10, min_ratio=1.5)


def test_scheduler_steps_the_optimizer_rate():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    config = warmup_cosine(opt, warmup=2, total=6)
    assert config["lr_scheduler"]["interval"] == "step"
    rates = []
    for _ in range(7):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        config["lr_scheduler"]["scheduler"].step()
    assert rates[:2] == [1.0, 2.0]
    assert rates[4] == pytest.approx(2.0 * 0.5 * (1 + math.cos(math.pi * 2 / 4)))
    assert rates[6] == pytest.approx(0.0)
