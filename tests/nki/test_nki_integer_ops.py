"""Integer / bit-vector nl ops: exact int32 semantics, logical right shift, floor mod."""

import numpy as np
import pytest

from migrator.nki import NkiConstraintError, NkiKernelError, run_kernel
from migrator.nki import language as nl

RNG = np.random.default_rng(11)


def _binary(name):
    def kernel(a, b):
        r = getattr(nl, name)(nl.load(a), nl.load(b))
        out = nl.ndarray(a.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    return kernel


def _big_ints(shape, dtype=np.int32):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, size=shape, dtype=np.int64).astype(dtype)


@pytest.mark.parametrize(
    "name, ref",
    [
        ("bitwise_and", np.bitwise_and),
        ("bitwise_or", np.bitwise_or),
        ("bitwise_xor", np.bitwise_xor),
    ],
)
def test_bitwise_ops_are_exact_beyond_fp32_mantissa(name, ref):
    a, b = _big_ints((128, 64)), _big_ints((128, 64))
    out, _ = run_kernel(_binary(name), a, b)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ref(a, b))


def test_left_shift_wraps_in_the_operand_width():
    a = _big_ints((128, 32))
    s = RNG.integers(0, 31, size=(128, 32)).astype(np.int32)
    out, _ = run_kernel(_binary("left_shift"), a, s)
    expected = (a.astype(np.int64) << s) & 0xFFFFFFFF
    np.testing.assert_array_equal(out, expected.astype(np.uint32).view(np.int32))


def test_right_shift_is_logical_not_arithmetic():
    # numpy's >> on int32 is arithmetic; the ALU only has a logical right shift.
    a = np.full((128, 4), -16, dtype=np.int32)
    s = np.full((128, 4), 2, dtype=np.int32)
    out, _ = run_kernel(_binary("right_shift"), a, s)
    assert out[0, 0] == (0xFFFFFFF0 >> 2)
    assert out[0, 0] != (-16 >> 2)


def test_mod_takes_the_sign_of_the_divisor_unlike_fmod():
    a = np.array([[7, -7, 7, -7]] * 128, dtype=np.int32)
    b = np.array([[3, 3, -3, -3]] * 128, dtype=np.int32)
    out, _ = run_kernel(_binary("mod"), a, b)
    np.testing.assert_array_equal(out[0], [1, 2, -2, -1])  # Python %
    fm, _ = run_kernel(_binary("fmod"), a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(fm[0], [1, -1, 1, -1])  # C fmod


def test_mod_on_floats_and_integer_mod_by_zero():
    a = np.array([[5.5, -5.5]] * 128, dtype=np.float32)
    out, _ = run_kernel(_binary("mod"), a, np.full_like(a, 2.0))
    np.testing.assert_allclose(out[0], [1.5, 0.5])
    z, _ = run_kernel(_binary("mod"), np.full((128, 2), 5, np.int32), np.zeros((128, 2), np.int32))
    np.testing.assert_array_equal(z, 0)


def test_large_int32_mod_is_exact():
    a = np.full((128, 2), 2**31 - 1, dtype=np.int32)
    out, _ = run_kernel(_binary("mod"), a, np.full((128, 2), 10, np.int32))
    np.testing.assert_array_equal(out, (2**31 - 1) % 10)


def test_python_operators_on_integer_tiles():
    def kernel(a):
        t = nl.load(a)
        r = ((t & 0xFF) | 0x100) ^ 3
        r = (r << 2) >> 1
        r = ~(r % 7)
        out = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    a = _big_ints((128, 16))
    out, _ = run_kernel(kernel, a)
    r = ((a.astype(np.int64) & 0xFF) | 0x100) ^ 3
    r = (r << 2) >> 1  # small positive values: logical == arithmetic
    np.testing.assert_array_equal(out, ~(r % 7))


def test_and_on_bool_tiles_stays_logical():
    def kernel(a):
        t = nl.load(a)
        r = (t > 0.0) & (t < 0.5)
        out = nl.ndarray(a.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    a = RNG.standard_normal((128, 8)).astype(np.float32)
    out, _ = run_kernel(kernel, a)
    np.testing.assert_array_equal(out, ((a > 0) & (a < 0.5)).astype(np.uint8))


def test_bitwise_on_float_tile_is_rejected():
    a = np.ones((128, 4), np.float32)
    with pytest.raises(NkiConstraintError, match="integer tiles"):
        run_kernel(_binary("bitwise_and"), a, a)


def test_invert_on_float_tile_is_rejected():
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.invert(nl.load(a)))
        return out

    with pytest.raises((NkiConstraintError, NkiKernelError), match="integer tiles"):
        run_kernel(kernel, np.ones((128, 4), np.float32))


def test_integer_divide_is_true_division():
    # floor(i / w) is how published kernels split a flat index; the quotient must be fractional
    def kernel(a):
        q = nl.floor(nl.load(a) / 38, dtype=nl.int32)
        out = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=q)
        return out

    a = np.arange(128 * 4, dtype=np.int32).reshape(128, 4)
    out, _ = run_kernel(kernel, a)
    np.testing.assert_array_equal(out, a // 38)


def _tensor_scalar_bits(op0, operand0, op1=None, operand1=None):
    from migrator.nki import isa_legacy as nisa

    def kernel(a):
        r = nisa.tensor_scalar(nl.load(a), op0=op0, operand0=operand0, op1=op1, operand1=operand1)
        out = nl.ndarray(a.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    return kernel


def test_tensor_scalar_bit_ops_work_on_the_raw_integer_bits():
    # a histogram's bin `(key >> 8) & 255` of keys past 2**24: exact, as the ALU table says
    a = _big_ints((128, 64)) & 0x7FFFFFFF
    out, _ = run_kernel(_tensor_scalar_bits(nl.right_shift, 8, nl.bitwise_and, 255), a)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, (a >> 8) & 255)
    # a mask that is no float32 value survives (not read through fp32)
    out, _ = run_kernel(_tensor_scalar_bits(nl.bitwise_and, 0x7FFFFFF1), a)
    np.testing.assert_array_equal(out, a & 0x7FFFFFF1)


def test_tensor_scalar_refuses_bit_ops_on_floats_and_mixed_operator_kinds():
    x = RNG.standard_normal((128, 8)).astype(np.float32)
    with pytest.raises((NkiConstraintError, NkiKernelError), match="integers only"):
        run_kernel(_tensor_scalar_bits(nl.bitwise_and, 3), x)
    a = _big_ints((128, 8))
    with pytest.raises((NkiConstraintError, NkiKernelError), match="mix a bit-vector"):
        run_kernel(_tensor_scalar_bits(nl.bitwise_and, 3, nl.add, 1), a)
