"""Accesses at one offset for every lane (`acc[i][j]` of a register tile, `w[k]` in a loop)
take a short path in `memory._resolve`; it must give what the general path gives: the same
values, bounds checks, extents and stored elements, for global, shared and local memory."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from migrator.cuda.interp import InterpOptions, OutOfBoundsError, RunResult
from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.values import scalar

Runner = Callable[..., RunResult]  # the `krun` fixture (conftest.py)

REGISTER_TILE = """
__global__ void tile(const float* a, const float* b, float* c, int K) {
    int t = threadIdx.x;
    float ra[4], rb[4], acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < 4; i++) { ra[i] = a[(k * 8 + t) * 4 + i]; rb[i] = b[k * 4 + i]; }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] += ra[i] * rb[j];
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) c[(t * 4 + i) * 4 + j] = acc[i][j];
}"""


def test_a_register_tile_computes_the_outer_products(krun: Runner) -> None:
    k = 9
    rng = np.random.default_rng(0)
    a = rng.standard_normal(k * 8 * 4).astype(np.float32)
    b = rng.standard_normal(k * 4).astype(np.float32)
    c = np.zeros(8 * 16, np.float32)
    krun(REGISTER_TILE, "tile", 1, 8, a=a, b=b, c=c, K=k)
    want = np.einsum("kti,kj->tij", a.reshape(k, 8, 4).astype(np.float64),
                     b.reshape(k, 4).astype(np.float64))  # fmt: skip
    np.testing.assert_allclose(c.reshape(8, 4, 4), want, rtol=1e-5, atol=1e-5)


def test_uniform_reads_of_global_and_shared_memory_by_some_lanes(krun: Runner) -> None:
    src = """
    __global__ void k(const float* w, float* out) {
        __shared__ float s[4];
        int t = threadIdx.x;
        if (t < 4) s[t] = w[t] * 2.0f;
        __syncthreads();
        float v = 0.0f;
        if (t % 3 == 0) v = w[2] + s[3];  // one element for the lanes that read it
        out[t] = v;
    }"""
    w = np.array([1, 2, 3, 4], np.float32)
    out = np.full(32, -1, np.float32)
    krun(src, "k", 1, 32, w=w, out=out)
    assert out.tolist() == [3.0 + 8.0 if t % 3 == 0 else 0.0 for t in range(32)]


def test_a_uniform_index_past_a_local_array_is_still_out_of_bounds(krun: Runner) -> None:
    src = """
    __global__ void k(float* out, int n) {
        float r[4];
        for (int i = 0; i < n; i++) r[i] = 1.0f;
        out[threadIdx.x] = r[0];
    }"""
    with pytest.raises(OutOfBoundsError, match="r"):
        krun(src, "k", 1, 8, out=np.zeros(8, np.float32), n=5)
    res = krun(src, "k", 1, 8, out=np.zeros(8, np.float32), n=5,
               options=InterpOptions(oob="report"))  # fmt: skip
    assert any(f.kind == "out_of_bounds" and "index 4" in f.message for f in res.findings)


def test_uniform_accesses_count_towards_extents_and_stores(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* y, int j) {
        y[j] = x[j + 3];  // every lane the same element
    }"""
    x, y = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    res = krun(src, "k", 1, 32, x=x, y=y, j=5,
               options=InterpOptions(extents=True, stores=("y",)))  # fmt: skip
    assert y[5] == 8.0 and np.count_nonzero(y) == 1
    assert res.extents["x"] == 9 and res.extents["y"] == 6
    assert res.stored["y"].nonzero()[0].tolist() == [5]


def test_derived_types_are_one_object_each() -> None:
    # identity makes the type comparisons of every operation cheap
    assert ct.ptr(ct.FLOAT) is ct.ptr(ct.FLOAT)
    assert ct.vec(ct.FLOAT, 4) is ct.vec(ct.FLOAT, 4)
    assert ct.array(ct.INT, 8) is ct.array(ct.INT, 8)
    assert ct.arith_result(ct.UINT, ct.INT) is ct.UINT
    assert ct.arith_result(ct.CHAR, ct.SHORT) is ct.INT


INTEGERS = [ct.CHAR, ct.UCHAR, ct.SHORT, ct.USHORT, ct.INT, ct.UINT, ct.LONG, ct.ULONG, ct.LLONG]


@given(st.sampled_from([*INTEGERS, ct.ULLONG]), st.integers(-(2**70), 2**70))
def test_integer_constants_wrap_like_a_conversion_of_their_bits(t: ct.CType, v: int) -> None:
    assert t.dtype is not None
    bits = np.array(v & ((1 << (8 * t.dtype.itemsize)) - 1)).astype(np.uint64)
    want = bits.astype(t.dtype)[()]
    got = scalar(t, v).data
    assert type(got) is type(want) and got == want


def test_an_element_every_lane_reads_is_one_value_for_all(krun: Runner) -> None:
    # `s += w[k]` by every lane: the loaded value is uniform (a numpy scalar, not a lane
    # array of copies); sums with per-lane values and the lanes' stores come out as before
    src = """
    __global__ void k(const float* w, const int* idx, float* out, int n) {
        int t = blockIdx.x * blockDim.x + threadIdx.x;
        float s = threadIdx.x;
        for (int k = 0; k < n; k++) s += w[idx[k]] * 0.5f;
        out[t] = s;
    }"""
    w = np.array([1, 2, 4, 8], np.float32)
    idx = np.array([3, 0, 2, 2], np.int32)
    out = np.zeros(64, np.float32)
    krun(src, "k", 2, 32, w=w, idx=idx, out=out, n=4)
    assert out.tolist() == [t % 32 + 0.5 * (8 + 1 + 4 + 4) for t in range(64)]


SHARED_TILES = """
__global__ void tiles(const float* a, float* out, int row) {
    __shared__ float s[8][16];
    float r[2][3];
    int ty = threadIdx.y, tx = threadIdx.x;
    s[ty][tx] = a[ty * 16 + tx];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) r[i][j] = i * 10.0f + j;
    __syncthreads();
    out[ty * 16 + tx] = s[tx % 8][ty] + s[row][tx] + r[ty % 2][tx % 3];
}"""


def test_rows_of_two_dimensional_arrays_read_as_their_elements(krun: Runner) -> None:
    # `s[i][k]` of a 2-D shared or register array takes the row's address, then the element
    a = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    krun(SHARED_TILES, "tiles", 1, (16, 8), a=a, out=out, row=5)
    ty, tx = np.meshgrid(np.arange(8), np.arange(16), indexing="ij")
    s = a.reshape(8, 16)
    want = s[tx % 8, ty] + s[5, tx] + (ty % 2) * 10.0 + tx % 3
    np.testing.assert_array_equal(out.reshape(8, 16), want)
    with pytest.raises(OutOfBoundsError, match=r"shared buffer 's': index 144, size 128"):
        krun(SHARED_TILES, "tiles", 1, (16, 8), a=a, out=out, row=9)  # a row past the last
