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


LANE_ELEMENTS = """
__global__ void k(const float* a, float* out, int K, int bad) {
    int t = threadIdx.x;
    float r[4][3];
    float v[3];
    float u[2];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) r[i][j] = a[t + i + j];
    for (int j = 0; j < 3; j++) v[j] = 1.0f;
    for (int k = 0; k < K; k++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) r[i][j] = fmaf(r[i][j], 0.5f, v[j]);
    r[1][2] += 3.0f;
    v[0]++;
    float* p = &r[2][0];  // the address of an element: a pointer into the lane's tile
    p[1] = 7.0f;
    if (t % 2) r[0][0] = -1.0f;  // a store by some lanes
    if (t < 40) u[0] = r[3][1];
    out[t * 8 + 0] = r[t % 4][t % 3];  // an index each lane has its own of: the general path
    out[t * 8 + 1] = r[1][2] + v[0] + r[2][1];
    out[t * 8 + 2] = r[0][0];
    out[t * 8 + 3] = u[1];  // never stored: an uninitialised read
    out[t * 8 + 4] = v[bad];  // past the array where bad = 3
    out[t * 8 + 5] = u[0];
}"""


@pytest.mark.parametrize("trace", [False, True])
def test_register_tile_elements_at_a_shared_index_load_and_store_as_the_general_path(
    krun: Runner, monkeypatch: pytest.MonkeyPatch, trace: bool
) -> None:
    """`r[i][j]` of a local array at an index every lane shares skips resolving a pointer
    (`ExprMixin._lane_element`); with it turned off, every value, finding and traced
    expression is the same: element stores by some lanes, compound assignments, increments,
    an element's address, uninitialised and out-of-bounds reads, traced values."""
    from migrator.cuda.interp.exprs import ExprMixin
    from migrator.cuda.interp.traced import Sym

    rng = np.random.default_rng(3)
    a = rng.standard_normal(80).astype(np.float32)
    got = []
    for fast in (True, False):
        if not fast:
            monkeypatch.setattr(ExprMixin, "_lane_element", lambda self, base, idx: None)
        args = {"a": a, "out": np.full(64 * 8, np.nan, np.float32)}
        if trace:
            args = {"a": np.array([Sym.leaf("a", i, float(x)) for i, x in enumerate(a)],
                                  dtype=object),
                    "out": np.full(64 * 8, np.nan, dtype=object)}  # fmt: skip
        opts = InterpOptions(oob="report", trace=trace, compact=not trace, races=False)
        res = krun(LANE_ELEMENTS, "k", 1, 64, K=3, bad=3, options=opts, **args)
        got.append((repr(list(args["out"])),
                    sorted((f.kind, f.message) for f in res.findings)))  # fmt: skip
    assert got[0] == got[1]
    kinds = {k for k, _ in got[0][1]}
    assert {"uninitialized_read", "out_of_bounds"} <= kinds, kinds


def test_a_register_tile_element_read_is_one_offset_in_every_lane_s_row(
    krun: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short path is taken (its loads counted) where the index is one for all lanes, and
    not where each lane has its own."""
    from migrator.cuda.interp import memory

    taken: list[int] = []
    real = memory.load_lane_element

    def load(m: object, acc: memory.Access) -> object:
        taken.append(int(acc.flat.size))
        return real(m, acc)  # type: ignore[arg-type]

    monkeypatch.setattr(memory, "load_lane_element", load)
    src = """
    __global__ void k(float* out) {
        int t = threadIdx.x;
        float r[4];
        for (int i = 0; i < 4; i++) r[i] = t * 4 + i;
        out[t] = r[2] + r[t % 4];
    }"""
    out = np.zeros(32, np.float32)
    krun(src, "k", 1, 32, out=out)
    t = np.arange(32)
    np.testing.assert_array_equal(out, (t * 4 + 2) + (t * 4 + t % 4))
    assert taken == [32]  # r[2]; r[t % 4] goes the general way
