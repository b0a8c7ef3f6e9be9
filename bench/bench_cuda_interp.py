"""Time the CUDA interpreter against numpy computing the same result in the same process.

Run: ``.venv/bin/python bench/bench_cuda_interp.py [--quick] [--repeat N]``. One row per case:
interpreter seconds, numpy seconds, their ratio (lower is better), and thread-statements per
second (statements executed x active lanes). The interpreter runs with its default checks on
(bounds, shared races, uninitialised reads), as users run it. Results are checked against
numpy before timing is reported.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from migrator.cuda.interp import RunResult, run_kernel
from migrator.cuda.parse import parse_text

VECTOR_ADD = """
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}"""

BLOCK_REDUCE = """
template <unsigned BLOCK>
__global__ void block_reduce(const float* in, float* partial, int n) {
  __shared__ float s[BLOCK];
  unsigned tid = threadIdx.x;
  int i = blockIdx.x * BLOCK + tid;
  s[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned stride = BLOCK / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}"""

TILED_MATMUL = """
#define TILE 16
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    As[ty][tx] = (row < M && t * TILE + tx < K) ? A[row * K + t * TILE + tx] : 0.0f;
    Bs[ty][tx] = (t * TILE + ty < K && col < N) ? B[(t * TILE + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}"""


def _time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def case_vector_add(n: int, repeat: int) -> tuple[float, float, RunResult]:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    src = parse_text(VECTOR_ADD, "vector_add.cu")
    t_i, res = _time(
        lambda: run_kernel(src, "vector_add", -(-n // 256), 256, {"a": a, "b": b, "c": c, "n": n}),
        repeat,
    )
    ref = np.empty_like(a)
    t_n, _ = _time(lambda: np.add(a, b, out=ref), max(2, repeat))  # warm, preallocated
    np.testing.assert_array_equal(c, ref)
    return t_i, t_n, res


def case_block_reduce(n: int, repeat: int) -> tuple[float, float, RunResult]:
    x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    blocks = -(-n // 256)
    part = np.zeros(blocks, np.float32)
    src = parse_text(BLOCK_REDUCE, "block_reduce.cu")
    t_i, res = _time(
        lambda: run_kernel(
            src,
            "block_reduce",
            blocks,
            256,
            {"in": x, "partial": part, "n": n},
            template_args=[256],
        ),
        repeat,
    )

    def ref() -> np.ndarray:
        pad = np.zeros(blocks * 256, np.float32)
        pad[:n] = x
        return pad.reshape(blocks, 256).sum(axis=1)

    t_n, expect = _time(ref, max(2, repeat))
    np.testing.assert_allclose(part, expect, rtol=1e-4, atol=1e-4)
    return t_i, t_n, res


def case_tiled_matmul(size: int, repeat: int) -> tuple[float, float, RunResult]:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.zeros((size, size), np.float32)
    src = parse_text(TILED_MATMUL, "matmul.cu")
    g = -(-size // 16)
    t_i, res = _time(
        lambda: run_kernel(
            src,
            "matmul",
            (g, g),
            (16, 16),
            {"A": a, "B": b, "C": c, "M": size, "N": size, "K": size},
        ),
        repeat,
    )
    t_n, expect = _time(lambda: a @ b, max(2, repeat))  # the first call initialises BLAS
    np.testing.assert_allclose(c, expect, rtol=1e-3, atol=1e-3 * np.sqrt(size))
    return t_i, t_n, res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs")
    args = ap.parse_args(argv)
    n = 1 << 20 if args.quick else 1 << 24
    mm = 128 if args.quick else 512
    cases = [
        (f"vector_add {n:,}", lambda: case_vector_add(n, args.repeat)),
        (f"block_reduce {n:,}", lambda: case_block_reduce(n, args.repeat)),
        (f"tiled_matmul {mm}^3", lambda: case_tiled_matmul(mm, args.repeat)),
    ]
    print(f"{'case':<24}{'interp s':>10}{'numpy s':>10}{'ratio':>10}{'thread-stmts/s':>16}")
    for name, fn in cases:
        t_i, t_n, res = fn()
        rate = res.thread_statements / t_i if t_i > 0 else 0.0
        print(f"{name:<24}{t_i:>10.3f}{t_n:>10.4f}{t_i / t_n:>10.0f}{rate:>16.3g}")


if __name__ == "__main__":
    main()
