"""Simple structs as locals: fields, brace initialisation, by-value passing and returns.

Shared and local arrays of structs hold their fields in memory (checked like any access);
struct pointer parameters are not modelled and raise. Every test here would give a different
number if fields were mixed up.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from migrator.cuda.interp import RunResult
from migrator.cuda.interp.findings import LaunchError, UnsupportedError

Runner = Callable[..., RunResult]


def test_struct_fields_init_copy_and_device_functions(krun: Runner) -> None:
    src = """
    struct Acc { float sum; int n; float2 mm; };
    typedef struct { float lo, hi; } Range;

    __device__ Acc push(Acc a, float x) {
      a.sum += x; a.n += 1;
      a.mm.x = fminf(a.mm.x, x); a.mm.y = fmaxf(a.mm.y, x);
      return a;
    }
    __device__ void widen(Range& r, float by) { r.lo -= by; r.hi += by; }

    __global__ void k(const float* in, float* out) {
      int t = threadIdx.x;
      Acc a = {0.0f, 0, {1e30f, -1e30f}};
      for (int j = 0; j < 4; ++j) a = push(a, in[t * 4 + j]);
      Acc b = a;          // a copy: changing b leaves a alone
      b.n = 100;
      Range r = {a.mm.x, a.mm.y};
      widen(r, 0.5f);
      out[t * 6 + 0] = a.sum;
      out[t * 6 + 1] = (float)a.n;
      out[t * 6 + 2] = (float)b.n;
      out[t * 6 + 3] = r.lo;
      out[t * 6 + 4] = r.hi;
      out[t * 6 + 5] = (float)sizeof(Acc) + (float)sizeof(Range) * 100.0f;
    }"""
    x = np.random.default_rng(2).standard_normal(32).astype(np.float32)
    out = np.zeros(8 * 6, np.float32)
    krun(src, "k", 1, 8, **{"in": x, "out": out})
    got = out.reshape(8, 6)
    xs = x.reshape(8, 4)
    sums = np.zeros(8, np.float32)
    for j in range(4):
        sums = (sums + xs[:, j]).astype(np.float32)
    np.testing.assert_array_equal(got[:, 0], sums)
    assert (got[:, 1] == 4).all() and (got[:, 2] == 100).all()
    np.testing.assert_array_equal(got[:, 3], xs.min(axis=1) - np.float32(0.5))
    np.testing.assert_array_equal(got[:, 4], xs.max(axis=1) + np.float32(0.5))
    assert (got[:, 5] == 16 + 8 * 100).all()  # float, int, float2 (8-aligned) -> 16 bytes


def test_partial_initialiser_zero_fills_and_divergent_field_store(krun: Runner) -> None:
    src = """
    struct P { int a; int b; int c; };
    __global__ void k(int* out) {
      int t = threadIdx.x;
      P p = {7};
      if (t % 2) p.b = t;
      out[t] = p.a * 10000 + p.b * 100 + p.c;
    }"""
    out = np.zeros(6, np.int32)
    res = krun(src, "k", 1, 6, out=out)
    np.testing.assert_array_equal(out, [70000 + 100 * (t if t % 2 else 0) for t in range(6)])
    assert res.findings == []


def test_field_store_into_uninitialised_struct_is_not_a_read(krun: Runner) -> None:
    src = """
    struct P { float a; float b; };
    __global__ void k(float* out) {
      P p;
      p.a = 1.0f;
      p.b = 2.0f;
      float4 v;
      v.x = 3.0f; v.y = 0.0f; v.z = 0.0f; v.w = 0.0f;
      out[threadIdx.x] = p.a + p.b + v.x;
    }"""
    out = np.zeros(4, np.float32)
    res = krun(src, "k", 1, 4, out=out)
    assert (out == 6).all() and res.findings == []


def test_shared_and_local_arrays_of_structs(krun: Runner) -> None:
    """A warp's partial (max, sum) pairs through `__shared__ MD s[...]`; a mixed-type struct
    (stored as bytes) beside it; `p->m` through a pointer into the array; a local array."""
    src = """
    struct MD { float m; float d; };
    struct Mixed { float v; int i; short s; };
    __global__ void k(const float* x, float* out) {
      __shared__ MD sm[4];
      __shared__ Mixed mx[4];
      MD loc[2];
      int t = threadIdx.x;
      if (t < 4) {
        MD v; v.m = x[t]; v.d = 1.0f;
        sm[t] = v;
        mx[t].v = x[t] * 2.0f; mx[t].i = t; mx[t].s = (short)(t + 1);
      }
      __syncthreads();
      loc[0] = sm[(t + 1) % 4];
      loc[1].m = sm[t % 4].m + mx[t % 4].v;
      loc[1].d = (float)(mx[t % 4].i + mx[t % 4].s);
      const MD* p = &sm[t % 4];
      out[2 * t] = loc[0].m + loc[0].d + p->m;
      out[2 * t + 1] = loc[1].m + loc[1].d + (float)sizeof(Mixed);
    }"""
    x = np.arange(8, dtype=np.float32) * 1.5
    out = np.zeros(16, np.float32)
    res = krun(src, "k", 1, 8, x=x, out=out)
    t = np.arange(8)
    np.testing.assert_array_equal(out[0::2], x[(t + 1) % 4] + 1 + x[t % 4])
    np.testing.assert_array_equal(out[1::2], 3 * x[t % 4] + 2 * (t % 4) + 1 + 12)
    assert res.findings == []


def test_a_struct_field_in_shared_memory_read_before_any_write_is_reported(
    krun: Runner,
) -> None:
    src = """
    struct MD { float m; float d; };
    __global__ void k(float* out) {
      __shared__ MD sm[2];
      if (threadIdx.x == 0) sm[0].m = 1.0f;
      __syncthreads();
      out[threadIdx.x] = sm[0].d;
    }"""
    res = krun(src, "k", 1, 2, out=np.zeros(2, np.float32))
    assert any(f.kind == "uninitialized_read" for f in res.findings)


def test_struct_pointer_parameters_are_unsupported(krun: Runner) -> None:
    param = """
    struct P { float a; };
    __global__ void k(P* ps, float* out) { out[0] = 1.0f; }"""
    with pytest.raises(LaunchError, match="struct parameter 'ps'"):
        krun(param, "k", 1, 1, ps=np.zeros(1, np.float32), out=np.zeros(1, np.float32))


def test_brace_list_argument_builds_the_parameter_type(krun: Runner) -> None:
    src = """
    struct SM { float maxval; float sum; };
    __device__ SM comb(SM a, SM b) {
      SM r; r.maxval = fmaxf(a.maxval, b.maxval); r.sum = a.sum + b.sum; return r;
    }
    __global__ void k(const float* x, float* out, int n) {
      SM acc; acc.maxval = -1e30f; acc.sum = 0.0f;
      for (int i = threadIdx.x; i < n; i += blockDim.x) acc = comb(acc, { x[i], 1.0f });
      out[threadIdx.x] = acc.maxval * 100.0f + acc.sum;
    }"""
    x = np.random.default_rng(5).standard_normal(16).astype(np.float32)
    out = np.zeros(4, np.float32)
    krun(src, "k", 1, 4, x=x, out=out, n=16)
    want = x.reshape(4, 4).max(axis=0) * np.float32(100) + np.float32(4)
    np.testing.assert_array_equal(out, want)


def test_functors_with_call_operators(krun: Runner) -> None:
    """CUB-style reductions pass a functor (`MaxOp()`) to a templated helper that calls
    `op(a, b)`; each functor's own operator() is what runs (max vs sum vs a stateful scale)."""
    src = """
    struct MaxOp { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
    struct SumOp { __device__ float operator()(float a, float b) const { return a + b; } };
    struct Scaled {
      float s;
      __device__ float operator()(float a, float b) const { return s * (a + b); }
    };

    template <typename Op>
    __device__ float warp_reduce(float v, Op op) {
      for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, off));
      return v;
    }

    __global__ void k(const float* in, float* out) {
      float v = in[threadIdx.x];
      float mx = warp_reduce(v, MaxOp());
      float sm = warp_reduce(v, SumOp());
      Scaled half = {0.5f};
      float sc = half(v, 1.0f);
      if (threadIdx.x == 0) { out[0] = mx; out[1] = sm; }
      out[2 + threadIdx.x] = sc;
    }"""
    x = np.random.default_rng(4).standard_normal(32).astype(np.float32)
    out = np.zeros(34, np.float32)
    krun(src, "k", 1, 32, **{"in": x, "out": out})
    assert out[0] == x.max()
    np.testing.assert_allclose(out[1], x.sum(dtype=np.float64), rtol=1e-5)
    np.testing.assert_array_equal(out[2:], (np.float32(0.5) * (x + np.float32(1.0))))


def test_a_struct_without_call_operator_is_not_callable(krun: Runner) -> None:
    src = """
    struct P { float a; };
    __global__ void k(float* out) { P p = {1.0f}; out[0] = p(1.0f, 2.0f); }"""
    with pytest.raises(UnsupportedError, match="no operator"):
        krun(src, "k", 1, 1, out=np.zeros(1, np.float32))
