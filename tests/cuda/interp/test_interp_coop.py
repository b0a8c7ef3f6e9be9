"""Cooperative groups basics (`coop.py`) and `dim3` locals: each result would differ if wrong."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from migrator.cuda.interp import RunResult
from migrator.cuda.interp.findings import BarrierError, UnsupportedError

Runner = Callable[..., RunResult]
HEAD = """
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
"""


def test_thread_rank_and_tiles_on_a_2d_block(krun: Runner) -> None:
    src = (
        HEAD
        + """
    __global__ void k(unsigned* rank, unsigned* trank, unsigned* meta, unsigned* sz) {
      cg::thread_block block = cg::this_thread_block();
      cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
      unsigned r = block.thread_rank();
      rank[r] = r;
      trank[r] = tile.thread_rank();
      meta[r] = tile.meta_group_rank();
      sz[r] = tile.size() * 1000 + block.size();
    }"""
    )
    n = 8 * 6
    out = {name: np.zeros(n, np.uint32) for name in ("rank", "trank", "meta", "sz")}
    krun(src, "k", 1, (8, 6), **out)
    r = np.arange(n)
    np.testing.assert_array_equal(out["rank"], r)  # x fastest: rank = x + 8 y
    np.testing.assert_array_equal(out["trank"], r % 16)
    np.testing.assert_array_equal(out["meta"], r // 16)
    assert (out["sz"] == 16 * 1000 + n).all()


def test_tile_shfl_down_stays_inside_its_tile(krun: Runner) -> None:
    src = (
        HEAD
        + """
    __global__ void k(const float* in, float* out) {
      auto block = cg::this_thread_block();
      auto tile = cg::tiled_partition<8>(block);
      float v = in[block.thread_rank()];
      for (int o = tile.size() / 2; o > 0; o /= 2) v += tile.shfl_down(v, o);
      if (tile.thread_rank() == 0) out[tile.meta_group_rank()] = v;
    }"""
    )
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(8, np.float32)
    res = krun(src, "k", 1, 64, **{"in": x, "out": out})
    np.testing.assert_array_equal(out, x.reshape(8, 8).sum(axis=1))  # width 8, not 32
    assert res.findings == []


def _butterfly(x: np.ndarray, n: int) -> np.ndarray:
    v = x.astype(np.float32).copy()
    lane = np.arange(v.size)
    k = n // 2
    while k:
        v = (v + v[lane ^ k]).astype(np.float32)
        k //= 2
    return v


def test_cg_reduce_is_cudas_butterfly_and_broadcast(krun: Runner) -> None:
    src = (
        HEAD
        + """
    __global__ void k(const float* in, float* out, int* mx) {
      cg::thread_block block = cg::this_thread_block();
      cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
      float v = in[block.thread_rank()];
      out[block.thread_rank()] = cg::reduce(tile, v, cg::plus<float>());
      mx[block.thread_rank()] = cg::reduce(tile, (int)block.thread_rank() % 7, cg::greater<int>());
    }"""
    )
    # values spanning magnitudes, so a different summation order rounds differently
    x = (np.random.default_rng(0).standard_normal(64) * 10.0 ** np.arange(64) % 7).astype(
        np.float32
    )
    out, mx = np.zeros(64, np.float32), np.zeros(64, np.int32)
    krun(src, "k", 1, 64, **{"in": x, "out": out, "mx": mx})
    np.testing.assert_array_equal(out, _butterfly(x, 32))
    assert len(set(out[:32].tolist())) == 1  # every lane of the tile has the result
    assert (mx == 6).all()


def test_block_sync_orders_shared_memory(krun: Runner) -> None:
    src = (
        HEAD
        + """
    __global__ void k(const float* in, float* out) {
      __shared__ float s[64];
      cg::thread_block block = cg::this_thread_block();
      unsigned t = block.thread_rank();
      s[t] = in[t];
      block.sync();
      for (unsigned st = 32; st > 0; st >>= 1) {
        if (t < st) s[t] += s[t + st];
        cg::sync(block);
      }
      if (t == 0) out[0] = s[0];
    }"""
    )
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(1, np.float32)
    res = krun(src, "k", 1, 64, **{"in": x, "out": out})
    assert out[0] == x.sum()
    assert res.findings == []  # without the syncs this races (see the next test)
    racy = src.replace("block.sync();", "").replace("cg::sync(block);", "")
    assert any(
        f.kind == "shared_race" for f in krun(racy, "k", 1, 64, **{"in": x, "out": out}).findings
    )


def test_divergent_block_sync_is_a_barrier_error(krun: Runner) -> None:
    src = (
        HEAD
        + """
    __global__ void k(float* a) {
      cg::thread_block block = cg::this_thread_block();
      if (block.thread_rank() < 16) block.sync();
      a[threadIdx.x] = 1.0f;
    }"""
    )
    with pytest.raises(BarrierError):
        krun(src, "k", 1, 32, a=np.zeros(32, np.float32))


def test_tile_larger_than_a_warp_is_unsupported(krun: Runner) -> None:
    src = (
        HEAD
        + """
    __global__ void k(float* a) {
      auto tile = cg::tiled_partition<64>(cg::this_thread_block());
      a[tile.thread_rank()] = 1.0f;
    }"""
    )
    with pytest.raises(UnsupportedError, match="thread_block_tile<64>"):
        krun(src, "k", 1, 64, a=np.zeros(64, np.float32))


def test_dim3_locals(krun: Runner) -> None:
    src = """
    __global__ void k(unsigned* out) {
      dim3 b = blockDim;
      dim3 g(7);
      dim3 t = threadIdx;
      out[t.y * b.x + t.x] = b.x * 10000 + b.y * 1000 + g.x * 100 + g.y * 10 + g.z;
    }"""
    out = np.zeros(12, np.uint32)
    krun(src, "k", 1, (4, 3), out=out)
    assert (out == 4 * 10000 + 3 * 1000 + 7 * 100 + 10 + 1).all()
