"""Differential tests of the nl elementwise and reduction vocabulary against numpy."""

import math

import ml_dtypes
import numpy as np
import pytest

from migrator.nki import isa_legacy as nisa
from migrator.nki import language as nl
from migrator.nki import run_kernel

RNG = np.random.default_rng(7)
BF16 = ml_dtypes.bfloat16


def unary_kernel(name, out_dtype=None):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=out_dtype or a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=getattr(nl, name)(nl.load(a), dtype=out_dtype))
        return out

    return kernel


def binary_kernel(name):
    def kernel(a, b):
        r = getattr(nl, name)(nl.load(a), nl.load(b))
        out = nl.ndarray(a.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    return kernel


_erf = np.vectorize(math.erf)
UNARY_REF = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_apprx_tanh": lambda x: (
        0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    ),
    "erf": _erf,
    "sin": np.sin,
    "cos": np.cos,
    "abs": np.abs,
    "negative": np.negative,
    "square": np.square,
    "reciprocal": lambda x: 1 / x,
}
POSITIVE_ARG = {"log": "abs1", "sqrt": "abs", "rsqrt": "abs1"}


@pytest.mark.parametrize("name", sorted(UNARY_REF))
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_unary_matches_numpy(name, dtype):
    x = RNG.standard_normal((130, 33)).astype(np.float32)[:128]  # odd free size
    if name in POSITIVE_ARG:
        x = np.abs(x) + (1 if POSITIVE_ARG[name] == "abs1" else 0)
    x = x.astype(dtype)
    out = run_kernel(unary_kernel(name), x)[0]
    assert out.dtype == np.dtype(dtype)
    ref = np.asarray(UNARY_REF[name](x.astype(np.float64)), np.float64).astype(np.float32)
    if dtype is BF16:
        # fp32 math then one RNE rounding: within one bf16 ulp of the exact result
        np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2**-7, atol=1e-6)
    else:
        np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-6)


BINARY_REF = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": lambda a, b: np.power(np.abs(a), b),
}


@pytest.mark.parametrize("name", sorted(BINARY_REF))
def test_binary_matches_numpy(name):
    a = RNG.standard_normal((128, 40)).astype(np.float32)
    b = RNG.standard_normal((128, 40)).astype(np.float32)
    if name == "power":
        a = np.abs(a)
    np.testing.assert_allclose(
        run_kernel(binary_kernel(name), a, b)[0], BINARY_REF[name](a, b), rtol=1e-6
    )


@pytest.mark.parametrize(
    "name", ["equal", "not_equal", "greater", "greater_equal", "less", "less_equal"]
)
def test_comparisons_return_bool(name):
    a = RNG.integers(0, 3, (128, 16)).astype(np.float32)
    b = RNG.integers(0, 3, (128, 16)).astype(np.float32)
    out = run_kernel(binary_kernel(name), a, b)[0]
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, getattr(np, name)(a, b))


def test_nan_and_negative_zero_propagate():
    x = np.zeros((128, 4), np.float32)
    x[0] = [np.nan, -0.0, np.inf, -np.inf]
    out = run_kernel(unary_kernel("negative"), x)[0]
    assert np.isnan(out[0, 0]) and np.signbit(out[0, 2 - 1]) == 0 and out[0, 2] == -np.inf
    assert np.signbit(run_kernel(unary_kernel("abs"), -x)[0][0, 1]) == 0


def test_mixed_dtype_promotion_and_explicit_dtype():
    a = np.ones((128, 8), np.float16)
    b = np.ones((128, 8), BF16)
    assert run_kernel(binary_kernel("add"), a, b)[0].dtype == np.float32

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(x), 1.5, dtype=nl.bfloat16))
        return out

    assert run_kernel(kernel, a)[0].dtype == BF16


@pytest.mark.parametrize(
    "name, ref",
    [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean), ("prod", np.prod)],
)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, ref, keepdims):
    x = RNG.uniform(0.5, 1.5, (128, 6, 10)).astype(np.float32)

    def kernel(a):
        r = getattr(nl, name)(nl.load(a), axis=[1, 2], keepdims=keepdims)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    out = run_kernel(kernel, x)[0]
    expected = ref(x.astype(np.float64), axis=(1, 2), keepdims=keepdims)
    np.testing.assert_allclose(out.reshape(expected.shape), expected, rtol=1e-5)


def test_where_with_arange_predicate_and_tile_operators():
    x = RNG.standard_normal((128, 16)).astype(np.float32)

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        i_f = nl.arange(16)[None, :]
        y = nl.where(i_f < 8, t, -1.0)
        y = (y * 2 - 1) / 4 + (-t) ** 2
        nl.store(out, value=y)
        return out

    ref = (np.where(np.arange(16)[None, :] < 8, x, -1.0) * 2 - 1) / 4 + x**2
    np.testing.assert_allclose(run_kernel(kernel, x)[0], ref, rtol=1e-6)


def test_tensor_copy_int_is_bit_exact():
    x = RNG.integers(-(2**31), 2**31 - 1, (128, 8), dtype=np.int32)

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.tensor_copy(nl.load(a)))
        return out

    np.testing.assert_array_equal(run_kernel(kernel, x)[0], x)


def test_astype_and_reshape_methods():
    x = RNG.standard_normal((128, 8)).astype(np.float32)

    def kernel(a):
        out = nl.ndarray((128, 2, 4), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        t = nl.load(a).astype(nl.bfloat16)
        nl.store(out, value=t.reshape((128, 2, 4)))
        return out

    np.testing.assert_array_equal(run_kernel(kernel, x)[0], x.astype(BF16).reshape(128, 2, 4))


def test_spmd_program_queries():
    seen = []

    def kernel(a):
        seen.append(
            (
                nl.program_id(0),
                nl.program_id(1),
                nl.num_programs(0),
                nl.num_programs(),
                nl.program_ndim(),
            )
        )
        return a

    run_kernel(kernel, np.zeros((1, 1), np.float32), grid=(2, 3))
    assert seen[0] == (0, 0, 2, 6, 2) and seen[-1] == (1, 2, 2, 6, 2) and len(seen) == 6


def test_matmul_rounds_each_product_to_fp32_when_it_overflows():
    """+inf and -inf products sum to NaN, as fp32 products do (a fused BLAS would give inf)."""

    def kernel(a, b):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
        nl.store(out, value=nl.copy(acc))
        return out

    big = np.float32(3e30)
    a = np.full((64, 1), big, np.float32)
    b = np.where(np.arange(64) % 2 == 0, big, -big).astype(np.float32)[:, None]
    out, _ = run_kernel(kernel, a, b)
    assert np.isnan(np.asarray(out)[0, 0])
    small = np.ones((64, 1), np.float32)
    out, _ = run_kernel(kernel, small, small)  # the fast path is unchanged
    assert np.asarray(out)[0, 0] == 64.0
