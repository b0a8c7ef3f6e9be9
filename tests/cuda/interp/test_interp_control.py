"""Control flow over lanes: divergence, per-lane loops, device functions and templates."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from migrator.cuda.interp import RunResult

Runner = Callable[..., RunResult]  # the `krun` fixture (conftest.py)


def test_divergent_if_else(krun: Runner) -> None:
    src = """
    __global__ void k(int* o) {
      int i = threadIdx.x;
      int v;
      if (i % 3 == 0) { v = 100; } else if (i % 3 == 1) v = 200; else { v = -i; }
      o[i] = v;
    }"""
    o = np.zeros(10, np.int32)
    krun(src, "k", 1, 10, o=o)
    assert o.tolist() == [[100, 200, -i][i % 3] for i in range(10)]


def test_thread_dependent_trip_count(krun: Runner) -> None:
    src = """
    __global__ void k(int* o) {
      int s = 0;
      for (int j = 0; j < threadIdx.x; ++j) s += j;
      int w = 0, n = threadIdx.x;
      while (n > 0) { n /= 2; w++; }
      int d = 0;
      do { d++; } while (d < (int)threadIdx.x);
      o[threadIdx.x] = s * 10000 + w * 100 + d;
    }"""
    o = np.zeros(40, np.int32)
    krun(src, "k", 1, 40, o=o)
    exp = [sum(range(i)) * 10000 + i.bit_length() * 100 + max(1, i) for i in range(40)]
    assert o.tolist() == exp


def test_per_lane_break_continue_return(krun: Runner) -> None:
    src = """
    __global__ void k(int* o, int* early) {
      int i = threadIdx.x;
      if (i == 7) { early[0] = 1; return; }
      int acc = 0;
      for (int j = 0; j < 20; ++j) {
        if (j % 2 == 1) continue;
        if (j > i) break;
        acc += j;
      }
      o[i] = acc;
    }"""
    o = np.full(16, -1, np.int32)
    early = np.zeros(1, np.int32)
    krun(src, "k", 1, 16, o=o, early=early)
    exp = [sum(j for j in range(20) if j % 2 == 0 and j <= i) for i in range(16)]
    exp[7] = -1
    assert o.tolist() == exp and early[0] == 1


def test_device_function_with_reference_parameter_and_early_return(krun: Runner) -> None:
    src = """
    __device__ void accumulate(float& acc, float v) { acc += v; }
    __device__ int clamp_pos(int x) {
      if (x < 0) return 0;
      return x * 2;
    }
    __global__ void k(const float* x, float* o, int* c) {
      int i = threadIdx.x;
      float a = 1.0f;
      accumulate(a, x[i]);
      accumulate(a, x[i]);
      o[i] = a;
      c[i] = clamp_pos(i - 2);
    }"""
    x = np.arange(5, dtype=np.float32)
    o, c = np.zeros(5, np.float32), np.zeros(5, np.int32)
    krun(src, "k", 1, 5, x=x, o=o, c=c)
    assert o.tolist() == [1 + 2 * v for v in range(5)]
    assert c.tolist() == [0, 0, 0, 2, 4]


def test_template_instantiation_int_and_type(krun: Runner) -> None:
    src = """
    template <int N, typename T>
    __device__ T times(T v) { return v * N; }
    template <typename T>
    __device__ T twice(T v) { return v + v; }
    template <int BLOCK, typename T>
    __global__ void k(const T* x, T* o) {
      __shared__ T buf[BLOCK];
      int i = threadIdx.x;
      buf[i] = times<BLOCK, T>(x[i]);
      __syncthreads();
      o[i] = twice(buf[BLOCK - 1 - i]);
    }"""
    x = np.arange(8, dtype=np.float64)
    o = np.zeros(8, np.float64)
    krun(src, "k", 1, 8, template_args=[8, "double"], x=x, o=o)
    assert o.tolist() == [2 * 8 * (7 - i) for i in range(8)]


def test_2d_block_and_grid_indices(krun: Runner) -> None:
    src = """
    __global__ void k(int* o) {
      int x = blockIdx.x * blockDim.x + threadIdx.x;
      int y = blockIdx.y * blockDim.y + threadIdx.y;
      o[y * gridDim.x * blockDim.x + x] = y * 1000 + x + threadIdx.z * 0 + warpSize * 0;
    }"""
    o = np.zeros(6 * 8, np.int32)
    krun(src, "k", (2, 3), (4, 2), o=o)
    assert o.tolist() == [y * 1000 + x for y in range(6) for x in range(8)]


def test_block_batches_give_same_result(krun: Runner) -> None:
    from migrator.cuda.interp import InterpOptions

    src = """
    __global__ void k(const float* a, float* o, int n) {
      __shared__ float s[64];
      int i = blockIdx.x * 64 + threadIdx.x;
      s[threadIdx.x] = i < n ? a[i] : 0.0f;
      __syncthreads();
      if (i < n) o[i] = s[63 - threadIdx.x] + s[threadIdx.x];
    }"""
    a = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    o1, o2 = np.zeros(1000, np.float32), np.zeros(1000, np.float32)
    r = krun(src, "k", 16, 64, a=a, o=o1, n=1000)
    r2 = krun(src, "k", 16, 64, a=a, o=o2, n=1000, options=InterpOptions(block_batch=3))
    assert r.batches == 1 and r2.batches == 6
    np.testing.assert_array_equal(o1, o2)


def test_local_arrays_and_vector_types(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* o) {
      float loc[4] = {1.0f, 2.0f, 3.0f, 4.0f};
      int i = threadIdx.x;
      loc[i % 4] += x[i];
      float4 v = make_float4(loc[0], loc[1], loc[2], loc[3]);
      v.w = v.x + v.y;
      float2 p;
      p.x = v.z; p.y = v.w;
      o[i] = p.x * 10.0f + p.y;
    }"""
    x = np.arange(8, dtype=np.float32)
    o = np.zeros(8, np.float32)
    krun(src, "k", 1, 8, x=x, o=o)
    exp = []
    for i in range(8):
        loc = [1.0, 2.0, 3.0, 4.0]
        loc[i % 4] += i
        exp.append(loc[2] * 10 + loc[0] + loc[1])
    assert o.tolist() == exp


def test_float4_reinterpret_load_and_store(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* o) {
      int i = threadIdx.x;
      float4 v = reinterpret_cast<const float4*>(x)[i];
      reinterpret_cast<float4*>(o)[i] = make_float4(v.w, v.z, v.y, v.x);
    }"""
    x = np.arange(16, dtype=np.float32)
    o = np.zeros(16, np.float32)
    krun(src, "k", 1, 4, x=x, o=o)
    assert o.tolist() == x.reshape(4, 4)[:, ::-1].reshape(-1).tolist()


def test_constant_memory_and_file_scope_constants(krun: Runner) -> None:
    src = """
    __constant__ int table[4] = {5, 6, 7, 8};
    const int OFFSET = 100;
    __device__ int counter;
    __global__ void k(int* o) {
      o[threadIdx.x] = table[threadIdx.x] + OFFSET;
      if (threadIdx.x == 0) counter = 42;
    }"""
    o = np.zeros(4, np.int32)
    r = krun(src, "k", 1, 4, o=o)
    assert o.tolist() == [105, 106, 107, 108]
    assert r.device_globals["counter"].tolist() == [42]
    assert r.device_globals["table"].tolist() == [5, 6, 7, 8]


def test_syncthreads_count_and_or_ldg_assert(krun: Runner) -> None:
    src = """
    __global__ void k(const int* x, int* o) {
      int v = __ldg(&x[threadIdx.x]);
      int c = __syncthreads_count(v > 2);
      int a = __syncthreads_and(v >= 0);
      int r = __syncthreads_or(v > 100);
      o[threadIdx.x] = c * 100 + a * 10 + r;
      assert(v >= 0);
    }"""
    x = np.arange(8, dtype=np.int32)
    o = np.zeros(8, np.int32)
    krun(src, "k", 1, 8, x=x, o=o)
    assert o.tolist() == [510] * 8
    from migrator.cuda.interp import InterpError

    x[3] = -1
    with pytest.raises(InterpError, match=r"device assertion failed in block \(0, 0, 0\) thread"):
        krun(src, "k", 1, 8, x=x, o=o)


def test_misaligned_float4_access_is_reported(krun: Runner) -> None:
    from migrator.cuda.interp import InterpOptions

    src = """
    __global__ void k(const float* x, float* o) {
      float4 v = reinterpret_cast<const float4*>(x + 1)[0];
      o[0] = v.x;
    }"""
    r = krun(
        src,
        "k",
        1,
        1,
        x=np.zeros(8, np.float32),
        o=np.zeros(1, np.float32),
        options=InterpOptions(oob="report"),
    )
    assert [f.kind for f in r.findings] == ["misaligned"]


def test_switch_fallthrough_default_and_continue_inside(krun: Runner) -> None:
    src = """
    typedef float real;
    using index_t = int;
    __global__ void k(int* o, real* f) {
      typedef unsigned int u32;
      u32 t = threadIdx.x;
      int v = 0;
      switch (t % 4) {
        case 0: v = 10; break;
        case 1:
        case 2: v += 20;       // 1 and 2 fall through into default
        default: v += 1;
      }
      int skipped = 0;
      for (index_t j = 0; j < 3; ++j) {
        switch (j) {
          case 1: continue;    // continues the for loop, not the switch
          default: break;
        }
        skipped += j;
      }
      o[t] = v * 100 + skipped;
      f[t] = (real)v;
    }"""
    o, f = np.zeros(8, np.int32), np.zeros(8, np.float32)
    krun(src, "k", 1, 8, o=o, f=f)
    exp_v = [[10, 21, 21, 1][t % 4] for t in range(8)]
    assert o.tolist() == [v * 100 + 2 for v in exp_v]
    assert f.tolist() == exp_v


def test_shared_scalar_and_float4_pointer_variable(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* o) {
      __shared__ float total;
      if (threadIdx.x == 0) total = 0.5f;
      __syncthreads();
      const float4* p = reinterpret_cast<const float4*>(x);
      float4 v = p[threadIdx.x];
      p += 1;
      o[threadIdx.x] = v.x + v.y + v.z + v.w + total + p[0].x;
    }"""
    x = np.arange(12, dtype=np.float32)
    o = np.zeros(2, np.float32)
    r = krun(src, "k", 1, 2, x=x, o=o)
    assert o.tolist() == [0 + 1 + 2 + 3 + 0.5 + 4, 4 + 5 + 6 + 7 + 0.5 + 4]
    assert r.findings == []


def test_auto_printf_and_unsupported_constructs_name_the_line(krun: Runner) -> None:
    from migrator.cuda.interp import UnsupportedError

    src = """
    __global__ void k(float* o) {
      auto v = threadIdx.x * 2.0f;   // float
      auto i = 3;                    // int
      printf("%f\\n", v);
      o[threadIdx.x] = v + i;
    }"""
    o = np.zeros(2, np.float32)
    krun(src, "k", 1, 2, o=o)
    assert o.tolist() == [3.0, 5.0]
    bad = """
    union P { float a; int b; };
    __global__ void k(float* o) {
      P p;
      o[0] = 1.0f;
    }"""
    with pytest.raises(UnsupportedError, match=r"kernel.cu:4:\d+: in kernel k: .*unknown type 'P'"):
        krun(bad, "k", 1, 1, o=o)


def test_template_defaults_and_deduction_order(krun: Runner) -> None:
    src = """
    template <typename T = double, int N = 4>
    __device__ T scale(T v) { return v * N; }
    template <typename T, int N = 2>
    __global__ void k(T* o) {
      // explicit <T, N>; then T deduced from 1.0f (float, not the default double), N default
      o[threadIdx.x] = scale<T, N>(o[threadIdx.x]) + scale(1.0f) + sizeof(scale(1.0f));
    }"""
    o = np.ones(2, np.float32)
    krun(src, "k", 1, 2, template_args=["float"], o=o)
    assert o.tolist() == [2.0 + 4.0 + 4.0] * 2
