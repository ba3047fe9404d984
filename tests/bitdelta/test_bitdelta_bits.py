import pytest
import torch
from bitdelta_testdata import MODULES_CHECKED

from zoo.bitdelta._bits import pack_signs, signed_matmul, unpack_bits, unpack_signs


def test_bit_order_is_lsb_first_along_the_input_axis():
    delta = -torch.ones(2, 64)  # (out, in): all bits 0 ...
    delta[0, 3] = 1.0  # ... except input 3 of output 0 -> word 0, bit 3
    delta[1, 32 + 31] = 1.0  # and input 63 of output 1 -> word 1, bit 31 (the int32 sign bit)
    mask = pack_signs(delta)
    assert mask.dtype == torch.int32 and mask.shape == (2, 2)  # (in/32, out)
    assert mask.tolist() == [[8, 0], [0, -(2**31)]]


def test_zero_delta_is_plus_scale_and_all_zero_is_minus_one_words():
    mask = pack_signs(torch.zeros(3, 32))
    assert mask.tolist() == [[-1, -1, -1]]  # every bit 1 (official: delta >= 0)
    assert (unpack_signs(mask, 32) == 1).all()


@pytest.mark.parametrize("out_f,in_f", [(7, 32), (5, 96), (4, 45), (3, 1)])
def test_pack_unpack_round_trip(out_f, in_f):
    g = torch.Generator().manual_seed(out_f * 100 + in_f)
    delta = torch.randn(out_f, in_f, generator=g)
    delta[delta.abs() < 0.3] = 0.0
    mask = pack_signs(delta)
    assert mask.shape == (-(-in_f // 32), out_f)
    assert torch.equal(unpack_bits(mask, in_f).T.bool(), delta >= 0)
    assert torch.equal(unpack_signs(mask, in_f), torch.where(delta >= 0, 1.0, -1.0))


def test_unpack_refuses_a_wrong_input_size():
    with pytest.raises(ValueError, match="cannot hold"):
        unpack_bits(torch.zeros(2, 4, dtype=torch.int32), 80)


@pytest.mark.parametrize("block", [1, 3, 1024])
def test_signed_matmul_equals_dense_signs(block):
    g = torch.Generator().manual_seed(0)
    delta = torch.randn(10, 64, generator=g)
    x = torch.randn(2, 5, 64, generator=g, requires_grad=True)
    mask = pack_signs(delta)
    signs = torch.where(delta >= 0, 1.0, -1.0)
    y = signed_matmul(x, mask, 64, block=block)
    torch.testing.assert_close(y, x @ signs.T, rtol=0, atol=1e-5)
    y.sum().backward()  # the signs are constants; x gets sum over outputs of S
    torch.testing.assert_close(x.grad, signs.sum(0).expand_as(x), rtol=0, atol=0)


def test_official_masks_unpack_to_the_official_signs(reference):
    for name in MODULES_CHECKED:
        for suffix in ("", "_bf16"):
            mask, sign = reference[f"{name}.mask{suffix}"], reference[f"{name}.sign{suffix}"]
            assert torch.equal(unpack_signs(mask, mask.shape[0] * 32).to(torch.int8), sign), name + suffix
            assert torch.equal(pack_signs(sign.float()), mask)
