"""Warp intrinsics: shuffles (idx/up/down/xor, with width), votes, warp reductions."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from migrator.cuda.interp import RunResult

Runner = Callable[..., RunResult]  # the `krun` fixture (conftest.py)


def _shfl(krun: Runner, call: str, n: int = 64) -> np.ndarray:
    src = f"""
    __global__ void k(int* o) {{
      int v = threadIdx.x * 10;
      o[threadIdx.x] = {call};
    }}"""
    o = np.zeros(n, np.int32)
    krun(src, "k", 1, n, o=o)
    return o


def test_shfl_down_keeps_own_value_past_the_segment(krun: Runner) -> None:
    o = _shfl(krun, "__shfl_down_sync(0xffffffff, v, 3)")
    lane = np.arange(64) % 32
    exp = np.where(lane + 3 < 32, (np.arange(64) + 3) * 10, np.arange(64) * 10)
    assert o.tolist() == exp.tolist()


def test_shfl_up_with_width(krun: Runner) -> None:
    o = _shfl(krun, "__shfl_up_sync(0xffffffff, v, 2, 8)")
    t = np.arange(64)
    exp = np.where(t % 8 >= 2, (t - 2) * 10, t * 10)
    assert o.tolist() == exp.tolist()


def test_shfl_xor_and_idx_with_width(krun: Runner) -> None:
    o = _shfl(krun, "__shfl_xor_sync(0xffffffff, v, 5)")
    t = np.arange(64)
    assert o.tolist() == (((t % 32) ^ 5) + (t // 32) * 32).__mul__(10).tolist()
    o = _shfl(krun, "__shfl_sync(0xffffffff, v, 3, 16)")
    assert o.tolist() == (((t // 16) * 16 + 3) * 10).tolist()
    o = _shfl(krun, "__shfl_sync(0xffffffff, v, threadIdx.x + 1)")  # wraps within 32
    assert o.tolist() == (((t // 32) * 32 + (t + 1) % 32) * 10).tolist()


def test_warp_reduction_with_shfl_xor(krun: Runner) -> None:
    src = """
    __global__ void k(const float* x, float* o) {
      float v = x[blockIdx.x * blockDim.x + threadIdx.x];
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
      o[blockIdx.x * blockDim.x + threadIdx.x] = v;
    }"""
    x = np.arange(128, dtype=np.float32)
    o = np.zeros(128, np.float32)
    krun(src, "k", 2, 64, x=x, o=o)
    exp = np.repeat(x.reshape(4, 32).sum(axis=1), 32)
    assert o.tolist() == exp.tolist()


def test_ballot_any_all_activemask(krun: Runner) -> None:
    src = """
    __global__ void k(unsigned int* b, int* a, unsigned int* m) {
      int i = threadIdx.x;
      b[i] = __ballot_sync(0xffffffff, i % 3 == 0);
      a[i] = __any_sync(0xffffffff, i == 40) * 10 + __all_sync(0xffffffff, i < 32);
      if (i % 2 == 0) m[i] = __activemask();
    }"""
    b, a, m = np.zeros(64, np.uint32), np.zeros(64, np.int32), np.zeros(64, np.uint32)
    r = krun(src, "k", 1, 64, b=b, a=a, m=m)
    bits = sum(1 << j for j in range(32) if j % 3 == 0)
    bits2 = sum(1 << j for j in range(32) if (j + 32) % 3 == 0)
    assert b.tolist() == [bits] * 32 + [bits2] * 32
    assert a.tolist() == [1] * 32 + [10] * 32
    assert m[0] == 0x55555555
    assert r.findings == []


def test_warp_mask_naming_exited_lanes_is_reported(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      if (threadIdx.x >= 20) return;
      float v = __shfl_down_sync(0xffffffff, 1.0f, 1);
      o[threadIdx.x] = v;
    }"""
    o = np.zeros(32, np.float32)
    r = krun(src, "k", 1, 32, o=o)
    assert [f.kind for f in r.findings] == ["warp_mask"]
    assert r.findings[0].span is not None and r.findings[0].span.line == 4


def test_shuffle_from_missing_lane_of_partial_warp_is_reported(krun: Runner) -> None:
    src = """
    __global__ void k(int* o) {
      o[threadIdx.x] = __shfl_down_sync(0xffffffff, (int)threadIdx.x, 8);
    }"""
    o = np.zeros(48, np.int32)
    r = krun(src, "k", 1, 48, o=o)  # warp 1 has lanes 32..47 only
    assert o[:24].tolist() == list(range(8, 32))
    assert o[32:40].tolist() == list(range(40, 48))
    assert [f.kind for f in r.findings] == ["warp_mask"]
    assert r.findings[0].count == 8
