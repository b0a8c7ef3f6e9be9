"""Sanitizer-grade checks: out-of-bounds, divergent barriers, shared races, uninitialised
shared reads, and the option modes that control them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from migrator.cuda.interp import BarrierError, InterpOptions, OutOfBoundsError, RunResult

Runner = Callable[..., RunResult]  # the `krun` fixture (conftest.py)

OOB = """
__global__ void k(const float* x, float* o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  o[i] = x[i] * 2.0f;
}"""


def test_out_of_bounds_read_raises_with_coordinates_and_line(krun: Runner) -> None:
    x, o = np.ones(40, np.float32), np.zeros(64, np.float32)
    with pytest.raises(OutOfBoundsError) as e:
        krun(OOB, "k", 2, 32, x=x, o=o, n=40)
    msg = str(e.value)
    assert "kernel.cu:4:" in msg and "in kernel k" in msg
    assert "'x'" in msg and "index 40, size 40" in msg
    assert "block (1, 0, 0) thread (8, 0, 0)" in msg
    assert "24 lanes" in msg


def test_out_of_bounds_report_mode_continues_and_poisons(krun: Runner) -> None:
    x, o = np.ones(40, np.float32), np.zeros(64, np.float32)
    r = krun(OOB, "k", 2, 32, x=x, o=o, n=40, options=InterpOptions(oob="report"))
    assert [f.kind for f in r.findings] == ["out_of_bounds"]
    f = r.findings[0]
    assert f.count == 24 and f.span is not None and f.span.line == 4
    assert f.coords[0].block == (1, 0, 0) and f.coords[0].thread == (8, 0, 0)
    assert (o[:40] == 2.0).all() and np.isnan(o[40:]).all()  # poison, not zeros


def test_out_of_bounds_below_the_start_is_found_where_lanes_share_elements(krun: Runner) -> None:
    # lanes read in pairs (no run structure: the bounds come from one reduction of the
    # offsets, where a negative one must count as outside)
    src = """
    __global__ void k(const float* x, float* o) {
      o[threadIdx.x] = x[(int)threadIdx.x / 2 - 1];  // (signed: -1, not 2^32 - 1)
    }"""
    x, o = np.ones(256, np.float32), np.zeros(512, np.float32)
    with pytest.raises(OutOfBoundsError, match=r"'x'.*index -1, size 256"):
        krun(src, "k", 1, 512, x=x, o=o)
    r = krun(src, "k", 1, 512, x=x, o=o, options=InterpOptions(oob="report"))
    assert [f.count for f in r.findings] == [2]  # lanes 0 and 1 read x[-1]


def test_out_of_bounds_shared_write(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      __shared__ float s[16];
      s[threadIdx.x] = 1.0f;
      __syncthreads();
      o[0] = s[0];
    }"""
    with pytest.raises(OutOfBoundsError, match=r"shared buffer 's': index 16, size 16"):
        krun(src, "k", 1, 32, o=np.zeros(1, np.float32))


def test_divergent_barrier_is_an_error(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      if (threadIdx.x < 16) {
        __syncthreads();
      }
      o[threadIdx.x] = 1.0f;
    }"""
    with pytest.raises(BarrierError) as e:
        krun(src, "k", 2, 32, o=np.zeros(64, np.float32))
    msg = str(e.value)
    assert "kernel.cu:4:" in msg and "16 of 32 live threads" in msg
    assert "thread (16, 0, 0) did not arrive" in msg and "2 block(s)" in msg


def test_barrier_after_uniform_early_exit_is_fine(krun: Runner) -> None:
    src = """
    __global__ void k(float* o, int rows) {
      if (blockIdx.x >= rows) return;      // whole blocks leave
      if (threadIdx.x >= 24) return;       // exited threads are not waited for
      __syncthreads();
      o[blockIdx.x * 32 + threadIdx.x] = 1.0f;
    }"""
    o = np.zeros(96, np.float32)
    r = krun(src, "k", 3, 32, o=o, rows=2)
    assert r.findings == [] and o.sum() == 48


def test_shared_race_without_barrier_is_found(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      __shared__ float s[64];
      s[threadIdx.x] = threadIdx.x;
      float v = s[(threadIdx.x + 1) % 64];   // no __syncthreads(): reads another's write
      o[threadIdx.x] = v;
    }"""
    r = krun(src, "k", 1, 64, o=np.zeros(64, np.float32))
    assert [f.kind for f in r.findings] == ["shared_race"]
    assert r.findings[0].span is not None and r.findings[0].span.line == 5


def test_same_statement_write_conflict_is_a_race(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      __shared__ float s[4];
      s[threadIdx.x % 4] = threadIdx.x;
      __syncthreads();
      o[threadIdx.x] = s[threadIdx.x % 4];
    }"""
    r = krun(src, "k", 1, 8, o=np.zeros(8, np.float32))
    assert [f.kind for f in r.findings] == ["shared_race"]


def test_barrier_separated_accesses_do_not_race(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      __shared__ float s[64];
      s[threadIdx.x] = threadIdx.x;
      __syncthreads();
      o[threadIdx.x] = s[63 - threadIdx.x];
    }"""
    r = krun(src, "k", 1, 64, o=np.zeros(64, np.float32))
    assert r.findings == []


def test_race_check_can_be_switched_off(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      __shared__ float s[8];
      s[threadIdx.x] = 1.0f;
      o[threadIdx.x] = s[7 - threadIdx.x];
    }"""
    r = krun(src, "k", 1, 8, o=np.zeros(8, np.float32), options=InterpOptions(races=False))
    assert r.findings == []


def test_uninitialised_shared_read_is_reported_and_poisoned(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      __shared__ float s[64];
      if (threadIdx.x < 32) s[threadIdx.x] = 1.0f;
      __syncthreads();
      o[threadIdx.x] = s[threadIdx.x];
    }"""
    o = np.zeros(64, np.float32)
    r = krun(src, "k", 1, 64, o=o)
    assert [f.kind for f in r.findings] == ["uninitialized_read"]
    assert r.findings[0].count == 32 and r.findings[0].coords[0].thread == (32, 0, 0)
    assert (o[:32] == 1).all() and np.isnan(o[32:]).all()
    o = np.ones(64, np.float32)
    r = krun(src, "k", 1, 64, o=o, options=InterpOptions(uninit="zero"))
    assert [f.kind for f in r.findings] == ["uninitialized_read"]
    assert (o[32:] == 0).all()


def test_dynamic_shared_memory_sized_by_launch(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
      extern __shared__ float buf[];
      buf[threadIdx.x] = threadIdx.x;
      __syncthreads();
      o[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
    }"""
    o = np.zeros(32, np.float32)
    krun(src, "k", 1, 32, shared_bytes=32 * 4, o=o)
    assert o.tolist() == list(range(31, -1, -1))
    with pytest.raises(OutOfBoundsError):
        krun(src, "k", 1, 32, shared_bytes=16 * 4, o=o)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"oob": "ignore"}, "oob='ignore'"),
        ({"uninit": "garbage"}, "uninit='garbage'"),
        ({"block_batch": 0}, "block_batch=0"),
        ({"fmad": "yes"}, "fmad='yes'"),
    ],
)
def test_options_reject_impossible_values(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        InterpOptions(**kwargs)


def test_argument_errors_are_clear(krun: Runner) -> None:
    from migrator.cuda.interp import InterpError

    with pytest.raises(InterpError, match="missing argument 'n'"):
        krun(OOB, "k", 1, 32, x=np.ones(32, np.float32), o=np.ones(32, np.float32))
    with pytest.raises(InterpError, match="dtype float64"):
        krun(OOB, "k", 1, 32, x=np.ones(32), o=np.ones(32, np.float32), n=1)
    with pytest.raises(InterpError, match="no __global__ function 'nope'"):
        krun(OOB, "nope", 1, 32)
