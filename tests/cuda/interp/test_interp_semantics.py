"""C semantics the interpreter must get right where numpy's defaults differ.

Each kernel's result would change if the rule were implemented the numpy way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from migrator.cuda.interp import InterpError, RunResult

Runner = Callable[..., RunResult]  # the `krun` fixture (conftest.py)


def test_int_division_and_modulo_truncate_toward_zero(krun: Runner) -> None:
    src = """
    __global__ void k(const int* a, const int* b, int* q, int* r) {
      int i = threadIdx.x;
      q[i] = a[i] / b[i];
      r[i] = a[i] % b[i];
    }"""
    a = np.array([-7, 7, -7, 7, -1, 5], dtype=np.int32)
    b = np.array([2, -2, -2, 2, 3, -3], dtype=np.int32)
    q, r = np.zeros(6, np.int32), np.zeros(6, np.int32)
    krun(src, "k", 1, 6, a=a, b=b, q=q, r=r)
    assert q.tolist() == [-3, -3, 3, 3, 0, -1]  # numpy // would give -4, -4, 3, 3, -1, -2
    assert r.tolist() == [-1, 1, -1, 1, -1, 2]  # numpy % would give 1, -1, -1, 1, 2, -1


def test_int32_overflow_wraps_and_unsigned_wraps(krun: Runner) -> None:
    src = """
    __global__ void k(int* o, unsigned int* u) {
      int big = 2147483647;
      o[0] = big + 1;
      o[1] = big * 2;
      unsigned int z = 0u;
      u[0] = z - 1u;
      u[1] = (unsigned int)(-1) / 2u;
    }"""
    o, u = np.zeros(2, np.int32), np.zeros(2, np.uint32)
    krun(src, "k", 1, 1, o=o, u=u)
    assert o.tolist() == [-(2**31), -2]
    assert u.tolist() == [2**32 - 1, 2**31 - 1]


def test_float_literal_promotion_double_vs_float(krun: Runner) -> None:
    # 0.1 is a double literal: x * 0.3 computes in double and rounds once to float;
    # x * 0.3f rounds the literal to float first. They differ for x = 3.
    src = """
    __global__ void k(const float* x, float* d, float* f) {
      d[0] = x[0] * 0.3;
      f[0] = x[0] * 0.3f;
    }"""
    x = np.array([3.0], np.float32)
    d, f = np.zeros(1, np.float32), np.zeros(1, np.float32)
    krun(src, "k", 1, 1, x=x, d=d, f=f)
    assert d[0] == np.float32(np.float64(3.0) * 0.3)
    assert f[0] == np.float32(3.0) * np.float32(0.3)
    assert d[0] != f[0]


def test_unsigned_comparison_converts_signed_operand(krun: Runner) -> None:
    src = """
    __global__ void k(int* o) {
      int m = -1;
      unsigned int one = 1u;
      o[0] = m < one;          // -1 becomes UINT_MAX: false
      o[1] = m < (int)one;     // signed compare: true
      o[2] = threadIdx.x - 1 > 0;  // unsigned arithmetic: 0u - 1 is huge
    }"""
    o = np.zeros(3, np.int32)
    krun(src, "k", 1, 1, o=o)
    assert o.tolist() == [0, 1, 1]


def test_shifts_arithmetic_vs_logical_and_bit_ops(krun: Runner) -> None:
    src = """
    __global__ void k(int* o, unsigned int* u) {
      int neg = -16;
      unsigned int un = 0xfffffff0u;
      o[0] = neg >> 2;           // arithmetic: -4
      u[0] = un >> 2;            // logical
      o[1] = 1 << 31;            // wraps to INT_MIN
      o[2] = (5 & 3) | (8 ^ 2);
      o[3] = ~0;
      o[4] = !5;
    }"""
    o, u = np.zeros(5, np.int32), np.zeros(1, np.uint32)
    krun(src, "k", 1, 1, o=o, u=u)
    assert o.tolist() == [-4, -(2**31), 1 | 10, -1, 0]
    assert u[0] == 0xFFFFFFF0 >> 2


def test_short_circuit_and_does_not_read_out_of_bounds(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, int* o, int n) {
      int i = threadIdx.x;
      if (i < n && x[i] > 0.0f) o[i] = 1;
      if (i >= n || x[i] < 0.0f) o[i < n ? i : 0] += 10;
    }"""
    x = np.array([1.0, -1.0, 2.0], np.float32)
    o = np.zeros(3, np.int32)
    krun(src, "k", 1, 32, x=x, o=o, n=3)  # 29 lanes would read x out of bounds
    assert o[1] == 10 and o[2] == 1


def test_casts_truncate_saturate_and_char_conversion(krun: Runner) -> None:
    src = """
    __global__ void k(int* o, unsigned char* c) {
      o[0] = (int)-2.7f;
      o[1] = static_cast<int>(3.9);
      o[2] = (int)3.0e10f;        // CUDA saturates float->int
      c[0] = (unsigned char)300;  // narrowing int wraps
      o[3] = (short)70000;
      o[4] = 7 / 2 * 2.0f;        // int division first, then float
    }"""
    o, c = np.zeros(5, np.int32), np.zeros(1, np.uint8)
    krun(src, "k", 1, 1, o=o, c=c)
    assert o.tolist() == [-2, 3, 2**31 - 1, 70000 - 65536, 6]
    assert c[0] == 44


def test_ternary_conversions_and_compound_assignment(krun: Runner) -> None:
    src = """
    __global__ void k(float* o, int* p) {
      int i = threadIdx.x;
      o[i] = (i % 2) ? 1 : 0.5f;   // common type float
      int v = 10;
      v += i; v -= 1; v *= 3; v /= 2; v %= 7; v <<= 1; v >>= 1; v |= 8; v &= 13; v ^= 1;
      p[i] = v;
      int j = i;
      p[i + 4] = j++ + ++j;
    }"""
    o, p = np.zeros(4, np.float32), np.zeros(8, np.int32)
    krun(src, "k", 1, 4, o=o, p=p)
    assert o.tolist() == [0.5, 1.0, 0.5, 1.0]
    exp = []
    for i in range(4):
        v = int(((10 + i - 1) * 3) / 2) % 7
        v = (((v << 1) >> 1) | 8) & 13 ^ 1
        exp.append(v)
    assert p[:4].tolist() == exp
    assert p[4:].tolist() == [2 * i + 2 for i in range(4)]


def test_pointer_arithmetic_and_deref(krun: Runner) -> None:
    src = """
    __global__ void k(float* x) {
      float* p = x + 2;
      p += 1;
      *p = 5.0f;
      p[-1] = *(x + 1) + 1.0f;
      const float* q = &x[4];
      x[0] = q - x;
    }"""
    x = np.arange(6, dtype=np.float32)
    krun(src, "k", 1, 1, x=x)
    assert x.tolist() == [4.0, 1.0, 2.0, 5.0, 4.0, 5.0]


def test_float_edge_values_nan_inf_negative_zero(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, int* i, unsigned int* u, float* f) {
      int t = threadIdx.x;
      i[t] = (int)x[t];             // saturating cvt.rzi: inf -> INT_MAX, nan -> 0
      u[t] = (unsigned int)x[t];    // negative -> 0
      f[t] = 1.0f / x[t];           // 1/-0 = -inf, 1/nan = nan
    }"""
    x = np.array([np.nan, np.inf, -np.inf, -0.0, -3.7, 3e9, -3e9, 2.5], np.float32)
    i, u, f = np.zeros(8, np.int32), np.zeros(8, np.uint32), np.zeros(8, np.float32)
    krun(src, "k", 1, 8, x=x, i=i, u=u, f=f)
    assert i.tolist() == [0, 2**31 - 1, -(2**31), 0, -3, 2**31 - 1, -(2**31), 2]
    assert u.tolist() == [0, 2**32 - 1, 0, 0, 0, 3_000_000_000, 0, 2]
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(f, np.float32(1) / x)
    assert np.signbit(f[3])


def test_pointer_comparison_loop(krun: Runner) -> None:
    src = """
    __global__ void k(float* x, int n) {
      float* end = x + n;
      for (float* p = x + threadIdx.x; p < end; p += blockDim.x) *p = *p * 2.0f;
    }"""
    x = np.arange(10, dtype=np.float32)
    krun(src, "k", 1, 4, x=x, n=10)
    assert x.tolist() == [2.0 * i for i in range(10)]


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_float32_operators_are_ieee_single_incl_specials(krun: Runner, op: str) -> None:
    specials = [0.0, -0.0, 1.0, -1.0, 1e-45, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan, 0.1, 7.0]
    grid_a, grid_b = np.meshgrid(np.array(specials, np.float32), np.array(specials, np.float32))
    a, b = grid_a.ravel().copy(), grid_b.ravel().copy()
    src = f"""
    __global__ void k(const float* a, const float* b, float* o, int n) {{
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) o[i] = a[i] {op} b[i];
    }}"""
    o = np.zeros(a.size, np.float32)
    krun(src, "k", -(-a.size // 64), 64, a=a, b=b, o=o, n=a.size)
    with np.errstate(all="ignore"):
        ref = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op](a, b)
    np.testing.assert_array_equal(o, ref)  # NaN positions must agree too
    assert ((np.signbit(o) == np.signbit(ref)) | np.isnan(ref)).all()  # and the sign of zero


def test_every_component_of_the_launch_vectors_reads_its_value(krun: Runner) -> None:
    """threadIdx / blockIdx / blockDim / gridDim .x .y .z, read in a loop (each field's parts
    kept per program after the first read), and a component they do not have refused."""
    src = """
    __global__ void k(unsigned* o) {
        unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        for (int r = 0; r < 2; r++) {
            unsigned* p = o + (b * blockDim.x * blockDim.y * blockDim.z + t) * 12 + r * 6;
            if (r == 0) { p[0] = threadIdx.x; p[1] = threadIdx.y; p[2] = threadIdx.z;
                          p[3] = blockIdx.x; p[4] = blockIdx.y; p[5] = blockIdx.z; }
            else { p[0] = blockDim.x; p[1] = blockDim.y; p[2] = blockDim.z;
                   p[3] = gridDim.x; p[4] = gridDim.y; p[5] = gridDim.z; }
        }
    }"""
    grid, block = (2, 3, 2), (4, 2, 3)
    o = np.zeros(12 * 24 * 12, np.uint32)  # 12 values per thread
    krun(src, "k", grid, block, o=o)
    got = o.reshape(2, 3, 2, 3, 2, 4, 12)  # bz, by, bx, tz, ty, tx, values
    bz, by, bx, tz, ty, tx = np.indices(got.shape[:-1])
    for i, want in enumerate([tx, ty, tz, bx, by, bz]):
        np.testing.assert_array_equal(got[..., i], want)
    for i, want in enumerate([*block, *grid]):
        np.testing.assert_array_equal(got[..., 6 + i], want)
    with pytest.raises(InterpError, match="threadIdx has fields x, y, z"):
        krun("__global__ void k(unsigned* o) { o[0] = threadIdx.w; }", "k", 1, 1, o=o)
