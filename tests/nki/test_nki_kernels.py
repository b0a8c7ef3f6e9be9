"""Tutorial-style kernels, imported unmodified through the shim, match numpy."""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import migrator.nki as mn

KERNELS = Path(__file__).parent / "kernels"
RNG = np.random.default_rng(1234)


@pytest.fixture(scope="module")
def legacy():
    return mn.load_kernel_module(KERNELS / "legacy_kernels.py")


@pytest.fixture(scope="module")
def new():
    return mn.load_kernel_module(KERNELS / "new_kernels.py")


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_tensor_add_spmd_grid(legacy, dtype):
    a, b = randn(256, 1024, dtype=dtype), randn(256, 1024, dtype=dtype)
    out = legacy.tensor_add[2, 2](a, b)
    assert out.dtype == np.dtype(dtype)
    expected = (a.astype(np.float32) + b.astype(np.float32)).astype(dtype)
    np.testing.assert_array_equal(out, expected)


def test_tensor_add_into_passed_output(legacy):
    a, b = randn(256, 300), randn(256, 300)
    c = np.zeros_like(a)
    assert legacy.tensor_add_into(a, b, c) is None
    np.testing.assert_array_equal(c, a + b)


def test_matmul_tiled_fp32(legacy):
    lhsT, rhs = randn(256, 256), randn(256, 1024)
    np.testing.assert_allclose(legacy.matmul_tiled(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-3)


def test_matmul_isa_bf16_accumulates_in_fp32(legacy):
    """bf16 inputs, four K tiles accumulated in fp32 PSUM: equals an fp32 matmul of the
    bf16-rounded inputs (products of bf16 values are exact in fp32)."""
    lhsT, rhs = randn(512, 128, dtype=ml_dtypes.bfloat16), randn(512, 512, dtype=ml_dtypes.bfloat16)
    out = legacy.matmul_isa(lhsT, rhs)
    assert out.dtype == np.float32
    ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    # a bf16 accumulator would be off by far more than this
    assert np.abs(out - ref).max() < 1e-3


def test_matmul_without_transpose_x(legacy):
    x, y = randn(128, 64), randn(64, 256)
    np.testing.assert_allclose(legacy.matmul_plain(x, y), x @ y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(128, 64), (32, 128)])
def test_transpose_is_exact(legacy, shape):
    x = randn(*shape)
    np.testing.assert_array_equal(legacy.transpose_tile(x), x.T)


def test_softmax_ragged_rows(legacy):
    x = randn(300, 200)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(legacy.softmax_rows(x), e / e.sum(1, keepdims=True), rtol=1e-5)


def test_rmsnorm(legacy):
    a, g = randn(300, 200), randn(200)
    ref = a / np.sqrt((a**2).mean(axis=1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(legacy.rmsnorm(a, g), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", ["layernorm_mean", "layernorm_bn"])
def test_layernorm(legacy, variant):
    x, gamma, beta = randn(256, 384), randn(1, 384), randn(1, 384)
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-5) * gamma + beta
    np.testing.assert_allclose(getattr(legacy, variant)(x, gamma, beta), ref, rtol=1e-4, atol=1e-4)


def test_activation_with_bias_scale_and_reduce(legacy):
    x, bias = randn(128, 64), randn(128, 1)
    out, sums = legacy.exp_activation(x, bias)
    ref = np.exp(x * 0.5 + bias)
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    np.testing.assert_allclose(sums, ref.sum(axis=1, keepdims=True), rtol=1e-5)


def test_iota_and_affine_select(legacy):
    x = randn(128, 128)
    ref = np.where(np.tril(np.ones((128, 128), dtype=bool)), x, -9984.0)
    np.testing.assert_array_equal(legacy.causal_mask(x), ref)


def test_new_dialect_tensor_add(new):
    a, b = randn(256, 512), randn(256, 512)
    np.testing.assert_array_equal(new.tensor_add(a, b), a + b)


def test_new_dialect_matmul_dst(new):
    lhsT, rhs = randn(384, 256), randn(384, 1024)
    np.testing.assert_allclose(new.matmul(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-3)


def test_new_dialect_iota(new):
    x = randn(128, 64)
    ref = x + (np.arange(128)[:, None] * 10 + np.arange(64)[None, :]).astype(np.float32)
    np.testing.assert_array_equal(new.iota_rows(x), ref)


def test_simulate_kernel_and_new_simulate(legacy, new):
    a, b = randn(128, 512), randn(128, 512)
    with mn.simulate():
        import neuronxcc.nki as nki_legacy
        import nki

        np.testing.assert_array_equal(
            nki_legacy.simulate_kernel(legacy.tensor_add[1, 1], a, b), a + b
        )
        np.testing.assert_array_equal(nki.simulate(new.tensor_add)(a, b), a + b)
