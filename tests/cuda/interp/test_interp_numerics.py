"""Floating-point behaviour: fma contraction, half/bf16 conversions, math functions, the
float64 shadow mode, and atomics with their deterministic order."""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

from migrator.cuda.interp import InterpOptions, RunResult
from migrator.cuda.interp.builtins import erf
from migrator.cuda.interp.findings import LaunchError

Runner = Callable[..., RunResult]  # the `krun` fixture (conftest.py)

FMA = """
__global__ void k(const float* a, const float* b, const float* c, float* o) {
  int i = threadIdx.x;
  o[i] = a[i] * b[i] + c[i];
  o[i + 1] = c[i] - a[i] * b[i];
}"""


def test_fmad_on_and_off_differ_on_a_crafted_input(krun: Runner) -> None:
    # a*b = 1 + 2^-11 + 2^-24 exactly; rounded to float it loses the 2^-24 term, so
    # a*b - (1 + 2^-11) is 0 unfused but 2^-24 fused.
    a = np.array([1 + 2**-12], np.float32)
    b = np.array([1 + 2**-12], np.float32)
    c = np.array([-(1 + 2**-11)], np.float32)
    on, off = np.zeros(2, np.float32), np.zeros(2, np.float32)
    krun(FMA, "k", 1, 1, a=a, b=b, c=c, o=on)
    krun(FMA, "k", 1, 1, a=a, b=b, c=c, o=off, options=InterpOptions(fmad=False))
    assert on[0] == np.float32(2**-24) and off[0] == 0.0
    exact = np.float64(a[0]) * np.float64(b[0])
    assert on[1] == np.float32(np.float64(c[0]) - exact)
    assert off[1] == np.float32(c[0] - a[0] * b[0])


def test_compound_assignment_contracts_too(krun: Runner) -> None:
    src = """
    __global__ void k(const float* a, float* o) {
      float acc = -(1.0f + 0.00048828125f);
      acc += a[0] * a[0];
      o[0] = acc;
    }"""
    a = np.array([1 + 2**-12], np.float32)
    o = np.zeros(1, np.float32)
    krun(src, "k", 1, 1, a=a, o=o)
    assert o[0] == np.float32(2**-24)
    krun(src, "k", 1, 1, a=a, o=o, options=InterpOptions(fmad=False))
    assert o[0] == 0.0


def test_half_and_bfloat16_conversions_match_ml_dtypes(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* h, float* b, __half* hs, __nv_bfloat16* bs) {
      int i = threadIdx.x;
      __half hv = __float2half(x[i]);
      __nv_bfloat16 bv = __float2bfloat16(x[i]);
      h[i] = __half2float(hv);
      b[i] = __bfloat162float(bv);
      hs[i] = hv;
      bs[i] = bv;
    }"""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(64) * 1000).astype(np.float32)
    x[:4] = [65520.0, 1e-8, -0.0, 3.14159]
    h, b = np.zeros(64, np.float32), np.zeros(64, np.float32)
    hs, bs = np.zeros(64, np.float16), np.zeros(64, ml_dtypes.bfloat16)
    krun(src, "k", 1, 64, x=x, h=h, b=b, hs=hs, bs=bs)
    with np.errstate(over="ignore"):  # 65520 rounds to inf in half, as on the GPU
        np.testing.assert_array_equal(h, x.astype(np.float16).astype(np.float32))
        np.testing.assert_array_equal(hs, x.astype(np.float16))
    np.testing.assert_array_equal(b, x.astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(bs.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_math_functions(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* o) {
      int i = threadIdx.x;
      float v = x[i];
      o[i * 8 + 0] = expf(v) + __expf(v) - exp(v);
      o[i * 8 + 1] = sqrtf(fabsf(v)) * rsqrtf(fabsf(v) + 1.0f);
      o[i * 8 + 2] = tanhf(v) + erff(v);
      o[i * 8 + 3] = fmaxf(v, 0.5f) + fminf(v, -0.5f);
      o[i * 8 + 4] = powf(fabsf(v), 1.5f);
      o[i * 8 + 5] = fmaf(v, v, 1.0f) + floorf(v) + ceilf(v);
      o[i * 8 + 6] = sinf(v) * cosf(v) + logf(fabsf(v) + 1.0f);
      o[i * 8 + 7] = max(v, 0.0f) + min(abs(-3), 2);
    }"""
    x = np.linspace(-3, 3, 16).astype(np.float32)
    o = np.zeros(128, np.float32)
    krun(src, "k", 1, 16, x=x, o=o)
    v = x.astype(np.float64)
    exp = np.stack(
        [
            np.exp(v),
            np.sqrt(np.abs(v)) / np.sqrt(np.abs(v) + 1),
            np.tanh(v) + erf(v),
            np.maximum(v, 0.5) + np.minimum(v, -0.5),
            np.abs(v) ** 1.5,
            v * v + 1 + np.floor(v) + np.ceil(v),
            np.sin(v) * np.cos(v) + np.log(np.abs(v) + 1),
            np.maximum(v, 0) + 2,
        ],
        axis=1,
    ).reshape(-1)
    np.testing.assert_allclose(o, exp, rtol=3e-6, atol=3e-6)


def test_vectorised_erf_matches_math_erf() -> None:
    xs = np.concatenate([np.linspace(-6, 6, 2001), [0.0, 1e-8, -1e-8, 2.5, -2.5]])
    got = erf(xs)
    exp = np.array([math.erf(x) for x in xs])
    np.testing.assert_allclose(got, exp, rtol=1e-12, atol=1e-14)


def test_fmaxf_ignores_nan_like_cuda(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* o) { o[0] = fmaxf(x[0], 1.0f); }"""
    o = np.zeros(1, np.float32)
    krun(src, "k", 1, 1, x=np.array([np.nan], np.float32), o=o)
    assert o[0] == 1.0


def test_shadow_f64_gives_float64_truth(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* o, int n) {
      float acc = 0.0f;
      for (int j = 0; j < n; ++j) acc += x[j];
      o[0] = acc;
    }"""
    x = np.full(4096, 0.1, np.float32)
    o = np.zeros(1, np.float32)
    krun(src, "k", 1, 1, x=x, o=o, n=4096)
    r = krun(
        src,
        "k",
        1,
        1,
        x=x,
        o=np.zeros(1, np.float32),
        n=4096,
        options=InterpOptions(shadow_f64=True),
    )
    truth = r.outputs["o"]
    assert truth.dtype == np.float64
    assert truth[0] == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-12)
    assert abs(o[0] - truth[0]) > 1e-4  # the fp32 loop drifts; the shadow does not


def test_float32_data_for_a_double_kernel_is_widened_and_computed_in_double(
    krun: Runner,
) -> None:
    """A float32 tensor given to a `double*` parameter (the float32 variant of a float64 kernel:
    `check.float32_variant`): its values widened exactly, the kernel's arithmetic in double,
    its outputs float64. Any other dtype mismatch is still refused."""
    src = """
    __global__ void k(const double* x, double* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = (x[i] + 1e8) - 1e8;
    }"""
    x = np.linspace(0.1, 0.9, 64, dtype=np.float32)
    r = krun(src, "k", 1, 64, x=x, y=np.zeros(64, np.float32), n=64)
    y = r.outputs["y"]
    assert y.dtype == np.float64
    want = (x.astype(np.float64) + 1e8) - 1e8  # in float32 the sum would round to 1e8
    assert np.array_equal(y, want) and np.abs(y - x).max() < 1e-7
    with pytest.raises(LaunchError, match="dtype float64"):
        krun(src.replace("double", "float"), "k", 1, 64, x=x.astype(np.float64),
             y=np.zeros(64, np.float32), n=64)  # fmt: skip


def test_atomic_add_and_max_results_and_old_values(krun: Runner) -> None:
    src = """
    __global__ void k(const int* x, int* sum, int* mx, int* old, unsigned int* bins) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      old[i] = atomicAdd(sum, x[i]);
      atomicMax(mx, x[i]);
      atomicAdd(&bins[x[i] & 3], 1u);
    }"""
    x = np.random.default_rng(2).integers(-50, 100, 256).astype(np.int32)
    s, mx = np.zeros(1, np.int32), np.full(1, -1000, np.int32)
    old, bins = np.zeros(256, np.int32), np.zeros(4, np.uint32)
    krun(src, "k", 4, 64, x=x, sum=s, mx=mx, old=old, bins=bins)
    assert s[0] == x.sum() and mx[0] == x.max()
    # ascending global thread id order: thread i sees the sum of x[:i]
    assert old.tolist() == np.concatenate([[0], np.cumsum(x)[:-1]]).tolist()
    assert bins.tolist() == np.bincount(x & 3, minlength=4).tolist()


def test_atomic_float_add_is_sequential_in_thread_order(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* s) {
      atomicAdd(s, x[blockIdx.x * blockDim.x + threadIdx.x]);
    }"""
    x = np.random.default_rng(3).standard_normal(1024).astype(np.float32)
    s = np.zeros(1, np.float32)
    krun(src, "k", 4, 256, x=x, s=s)
    assert s[0] == np.cumsum(x, dtype=np.float32)[-1]


def test_atomic_cas_exch_min(krun: Runner) -> None:
    src = """
    __global__ void k(int* lock, int* winner, int* mn, int* ex) {
      int t = threadIdx.x;
      if (atomicCAS(lock, 0, 1) == 0) winner[0] = t;
      atomicMin(mn, 100 - t);
      atomicExch(ex, t);
    }"""
    lock, winner = np.zeros(1, np.int32), np.full(1, -1, np.int32)
    mn, ex = np.full(1, 1000, np.int32), np.zeros(1, np.int32)
    krun(src, "k", 1, 64, lock=lock, winner=winner, mn=mn, ex=ex)
    assert lock[0] == 1 and winner[0] == 0 and mn[0] == 37 and ex[0] == 63


def test_atomic_fast_grouped_path_equals_rank_by_rank_reference(
    krun: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-group accumulate (fast path) and the rank loop (reference) agree exactly."""
    from migrator.cuda.interp import atomics

    src = """
    __global__ void k(const float* x, const int* bin, float* h, float* old, int* mx) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      old[i] = atomicAdd(&h[bin[i]], x[i]);
      atomicMax(&mx[bin[i]], i);
    }"""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(2048).astype(np.float32)
    bins = rng.integers(0, 5, 2048).astype(np.int32)
    results = []
    for limit in (10_000, 1):
        monkeypatch.setattr(atomics, "RANK_LIMIT", limit)
        h, old = np.zeros(5, np.float32), np.zeros(2048, np.float32)
        mx = np.zeros(5, np.int32)
        krun(src, "k", 8, 256, x=x, bin=bins, h=h, old=old, mx=mx)
        results.append((h, old, mx))
    for a, b in zip(results[0], results[1], strict=True):
        np.testing.assert_array_equal(a, b)
    h = results[0][0]
    for j in range(5):
        assert h[j] == np.cumsum(x[bins == j], dtype=np.float32)[-1]


def test_atomics_of_small_groups_equal_one_update_at_a_time_in_thread_order(krun: Runner) -> None:
    """Groups of at most RANK_LIMIT lanes (all ranks of all groups in one accumulate): every
    lane's old value and every final value are those of applying the lanes one by one in
    ascending thread id, in float32 (adds) and int32 (max, or)."""
    src = """
    __global__ void k(const float* x, const int* bin, float* h, float* old, int* mx, int* bits) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      old[i] = atomicAdd(&h[bin[i]], x[i]);
      atomicMax(&mx[bin[i]], (i * 37) % 101);
      atomicOr(&bits[bin[i]], 1 << (i % 31));
    }"""
    rng = np.random.default_rng(11)
    n, nb = 1024, 40  # about 26 lanes per address, a few hundred groups of ranks
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
    bins = rng.integers(0, nb, n).astype(np.int32)
    h0 = rng.standard_normal(nb).astype(np.float32)
    h, old = h0.copy(), np.zeros(n, np.float32)
    mx, bits = np.full(nb, -1, np.int32), np.zeros(nb, np.int32)
    krun(src, "k", 4, 256, x=x, bin=bins, h=h, old=old, mx=mx, bits=bits)
    ref, ref_old = h0.copy(), np.zeros(n, np.float32)
    ref_mx, ref_bits = [-1] * nb, [0] * nb
    for i in range(n):
        b = bins[i]
        ref_old[i] = ref[b]
        ref[b] = np.float32(ref[b] + x[i])
        ref_mx[b] = max(ref_mx[b], (i * 37) % 101)
        ref_bits[b] |= 1 << (i % 31)
    np.testing.assert_array_equal(old, ref_old)
    np.testing.assert_array_equal(h, ref)
    assert mx.tolist() == ref_mx and bits.tolist() == ref_bits


def test_bit_intrinsics_and_predicates(krun: Runner) -> None:
    src = """
    __global__ void k(const unsigned int* x, const float* f, int* o) {
      int i = threadIdx.x;
      o[i * 4 + 0] = __popc(x[i]);
      o[i * 4 + 1] = __clz(x[i]);
      o[i * 4 + 2] = __ffs(x[i]);
      o[i * 4 + 3] = isnan(f[i]) * 4 + isinf(f[i]) * 2 + signbit(f[i]);
    }"""
    x = np.array([0, 1, 0x80000000, 0xF0F0, 12, 0xFFFFFFFF], np.uint32)
    f = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0, -2.0], np.float32)
    o = np.zeros(24, np.int32)
    krun(src, "k", 1, 6, x=x, f=f, o=o)
    got = o.reshape(6, 4)
    assert got[:, 0].tolist() == [bin(int(v)).count("1") for v in x]
    assert got[:, 1].tolist() == [32 - int(v).bit_length() for v in x]
    assert got[:, 2].tolist() == [(int(v) & -int(v)).bit_length() for v in x]
    assert got[:, 3].tolist() == [4, 2, 3, 1, 0, 1]


def test_fast_math_implies_contraction(krun: Runner) -> None:
    a = np.array([1 + 2**-12], np.float32)
    c = np.array([-(1 + 2**-11)], np.float32)
    o = np.zeros(2, np.float32)
    krun(FMA, "k", 1, 1, a=a, b=a, c=c, o=o, options=InterpOptions(fmad=False, fast_math=True))
    assert o[0] == np.float32(2**-24)


def test_shadow_mode_sizes_dynamic_shared_memory_in_float_bytes() -> None:
    """`extern __shared__ float s[]` holds shared_bytes / 4 floats in shadow mode too."""
    from pathlib import Path

    import numpy as np

    from migrator.contract import load_spec
    from migrator.cuda.interp import InterpOptions, run_spec

    spec = load_spec(Path(__file__).resolve().parents[3] / "corpus" / "softmax_row.toml")
    (fp32,) = run_spec(spec, {"R": 37, "C": 300})
    (f64,) = run_spec(spec, {"R": 37, "C": 300}, options=InterpOptions(shadow_f64=True))
    np.testing.assert_allclose(f64, fp32, rtol=1e-5, atol=1e-7)


def test_fmaf_rounds_once_from_the_exact_product(krun: Runner) -> None:
    """`__fmaf_rn(a, b, c)` / `fmaf` of float32 lanes and of uniform float32 values: the exact
    product plus c, rounded once (where a * b + c rounded twice differs: a * (1/a) - 1)."""
    src = """
    __global__ void k(const float* a, const float* b, const float* c, float* o, float s) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        o[i] = __fmaf_rn(a[i], b[i], c[i]) + fmaf(s, s, -1.0f);
    }"""
    rng = np.random.default_rng(3)
    a = rng.uniform(1, 2, 1024).astype(np.float32)
    b = (1 / a).astype(np.float32)  # a * b is 1 only approximately: fma keeps the residue
    c = -np.ones(1024, np.float32)
    o = np.zeros(1024, np.float32)
    s = np.float32(1.1)
    krun(src, "k", 4, 256, a=a, b=b, c=c, o=o, s=s)
    exact = (a.astype(np.float64) * b + c).astype(np.float32)
    uniform = np.float32(np.float64(s) * np.float64(s) - 1.0)
    np.testing.assert_array_equal(o, exact + uniform)
    assert np.any((a * b + c) != exact)  # (rounded twice it differs: the test can fail)
