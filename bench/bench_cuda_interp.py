"""Time the CUDA interpreter against numpy and against numba's CUDA simulator.

Run: ``.venv/bin/python bench/bench_cuda_interp.py [--quick] [--repeat N] [--no-numba]``. One row
per case: interpreter seconds, numpy seconds (best of the rounds), their ratio (lower is
better; the median of the per-round ratios: each round runs the interpreter and both baselines
back to back, so all see the same machine load), and thread-statements per second (statements
executed x active lanes). The interpreter runs with its default checks on (bounds, shared
races, uninitialised reads), as users run it. Results are
checked against numpy before timing is reported.

Two numpy baselines. "numpy s" is the fastest numpy spelling of the math (BLAS for the matmul,
pairwise ``sum`` for the reduction): it does not compute the kernel's bits, since it adds in
another order. "same-bits s" is numpy computing exactly the kernel's result: the same tree of
fp32 additions, the same k-ascending fused multiply-adds per output. The interpreter's output is
asserted bit-equal to it, so that column is both a baseline and an end-to-end check of the
interpreter's arithmetic order.

numba column: if `numba-cuda` is installed, the same three kernels written for `numba.cuda` run
in its simulator (`NUMBA_ENABLE_CUDASIM=1`: one Python thread per CUDA thread). It is far too
slow for the benchmark sizes, so it runs a small launch; its speed is expressed in the
interpreter's unit by dividing the interpreter's thread-statement count *for that same small
launch* by the simulator's seconds, and the "x numba" column compares that extrapolated rate with
the interpreter's rate at full size. Without numba-cuda the column is skipped with a message.
"""

from __future__ import annotations

import argparse
import os
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

# Few lanes, long loops: one block of 64 threads, each accumulating a 4 x 4 register tile over
# a long K loop (the inner step of a register-tiled GEMM). Every statement runs for only 64
# lanes, so the interpreter's cost per statement, not per element, decides its time: the
# regime of the real kernels that take longest to migrate (`bench_migrate_time.py`).
REGISTER_TILE = """
__global__ void register_tile(const float* a, const float* b, float* c, int K) {
  int t = threadIdx.x;
  float ra[4], rb[4], acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int k = 0; k < K; ++k) {
    for (int i = 0; i < 4; ++i) { ra[i] = a[(k * 64 + t) * 4 + i]; rb[i] = b[k * 4 + i]; }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] += ra[i] * rb[j];
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) c[(t * 4 + i) * 4 + j] = acc[i][j];
}"""


Timing = tuple[list[float], list[float], list[float], RunResult]  # per round: interp, np, same


def _rounds(
    interp: Callable[[], RunResult],
    fastest: Callable[[], Any],
    same_bits: Callable[[], Any],
    repeat: int,
    inner: tuple[int, int] = (5, 3),
) -> tuple[Timing, Any, Any]:
    """Run the interpreter and both numpy baselines in turn, ``repeat`` rounds: this shared
    machine's speed drifts over seconds, and interleaving exposes all three to the same drift.
    The numpy baselines are short, so each round keeps the best of ``inner`` calls of each.
    Returns the per-round seconds and each baseline's last result."""
    t_i: list[float] = []
    t_n: list[float] = []
    t_s: list[float] = []
    res: Any = None
    outs: list[Any] = [None, None]
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = interp()
        t_i.append(time.perf_counter() - t0)
        for fn, count, times, slot in ((fastest, inner[0], t_n, 0), (same_bits, inner[1], t_s, 1)):
            best = float("inf")
            for _ in range(count):
                t0 = time.perf_counter()
                outs[slot] = fn()
                best = min(best, time.perf_counter() - t0)
            times.append(best)
    return (t_i, t_n, t_s, res), outs[0], outs[1]


def _ratio(num: list[float], den: list[float]) -> float:
    """Median over rounds of the per-round ratio."""
    return float(np.median(np.asarray(num) / np.asarray(den)))


def case_vector_add(n: int, repeat: int) -> Timing:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    c = np.ones(n, np.float32)  # written once so the timed run takes no first-touch page faults
    src = parse_text(VECTOR_ADD, "vector_add.cu")
    ref = np.empty_like(a)

    def add() -> np.ndarray:  # warm, preallocated; the same bits: one rounding per element
        return np.add(a, b, out=ref)

    timing, _, _ = _rounds(
        lambda: run_kernel(src, "vector_add", -(-n // 256), 256, {"a": a, "b": b, "c": c, "n": n}),
        add,
        add,
        repeat,
    )
    np.testing.assert_array_equal(c, ref)
    return timing


def case_block_reduce(n: int, repeat: int) -> Timing:
    x = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    blocks = -(-n // 256)
    part = np.zeros(blocks, np.float32)
    src = parse_text(BLOCK_REDUCE, "block_reduce.cu")

    def ref() -> np.ndarray:
        pad = np.zeros(blocks * 256, np.float32)
        pad[:n] = x
        return pad.reshape(blocks, 256).sum(axis=1)

    def same_bits() -> np.ndarray:
        """The kernel's own tree: halve the live prefix of every block 8 times, fp32 adds."""
        s = np.zeros((blocks, 256), np.float32)
        s.reshape(-1)[:n] = x
        stride = 128
        while stride > 0:
            s[:, :stride] += s[:, stride : 2 * stride]
            stride //= 2
        return s[:, 0]

    timing, expect, bits = _rounds(
        lambda: run_kernel(
            src,
            "block_reduce",
            blocks,
            256,
            {"in": x, "partial": part, "n": n},
            template_args=[256],
        ),
        ref,
        same_bits,
        repeat,
    )
    np.testing.assert_allclose(part, expect, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(part, bits)
    return timing


def case_tiled_matmul(size: int, repeat: int) -> Timing:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.ones((size, size), np.float32)
    src = parse_text(TILED_MATMUL, "matmul.cu")
    g = -(-size // 16)

    def same_bits() -> np.ndarray:
        """The kernel's order: one fp32 accumulator per output, k ascending, each step a fused
        multiply-add (nvcc's default --fmad=true): exact product + acc, rounded once."""
        acc = np.zeros((size, size), np.float32)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        for k in range(size):
            acc = (np.multiply.outer(a64[:, k], b64[k]) + acc).astype(np.float32)
        return acc

    a @ b  # the first call initialises BLAS
    timing, expect, bits = _rounds(
        lambda: run_kernel(
            src,
            "matmul",
            (g, g),
            (16, 16),
            {"A": a, "B": b, "C": c, "M": size, "N": size, "K": size},
        ),
        lambda: a @ b,
        same_bits,
        repeat,
        inner=(5, 1 if size > 256 else 3),
    )
    np.testing.assert_allclose(c, expect, rtol=1e-3, atol=1e-3 * np.sqrt(size))
    np.testing.assert_array_equal(c, bits)
    return timing


def case_register_tile(k: int, repeat: int) -> Timing:
    rng = np.random.default_rng(4)
    a = rng.standard_normal(k * 64 * 4, dtype=np.float32)
    b = rng.standard_normal(k * 4, dtype=np.float32)
    c = np.ones(64 * 16, np.float32)
    src = parse_text(REGISTER_TILE, "register_tile.cu")
    a3 = a.reshape(k, 64, 4).astype(np.float64)
    b2 = b.reshape(k, 4).astype(np.float64)

    def same_bits() -> np.ndarray:
        """Per thread and tile element, k ascending, each step a fused multiply-add."""
        acc = np.zeros((64, 4, 4), np.float32)
        for kk in range(k):
            acc = (a3[kk][:, :, None] * b2[kk][None, None, :] + acc).astype(np.float32)
        return acc.reshape(-1)

    timing, expect, bits = _rounds(
        lambda: run_kernel(src, "register_tile", 1, 64, {"a": a, "b": b, "c": c, "K": k}),
        lambda: np.einsum("kti,kj->tij", a3, b2).reshape(-1),
        same_bits,
        repeat,
    )
    np.testing.assert_allclose(c, expect, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    np.testing.assert_array_equal(c, bits)
    return timing


# --- numba's CUDA simulator ------------------------------------------------------------------
NUMBA_SIZES = {"vector_add": 4096, "block_reduce": 2048, "tiled_matmul": 32}


cuda: Any = None  # numba.cuda once loaded: the simulator swaps this module global per launch


def numba_simulator() -> Any | None:
    """`numba.cuda` in simulator mode, or None (with the reason printed) if unavailable."""
    global cuda
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    try:
        from numba import cuda as numba_cuda
    except ImportError as e:
        print(f"numba column skipped: numba-cuda is not installed ({e}); pip install numba-cuda")
        return None
    cuda = numba_cuda
    return cuda


# The three benchmark kernels, line for line, in numba.cuda's Python dialect. They name the
# module global `cuda`, which the simulator replaces by its fake module during a launch.
def _nb_vector_add(a: Any, b: Any, c: Any, n: int) -> None:
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        c[i] = a[i] + b[i]


def _nb_block_reduce(x: Any, partial: Any, n: int) -> None:
    s = cuda.shared.array(256, dtype=np.float32)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * 256 + tid
    s[tid] = x[i] if i < n else np.float32(0.0)
    cuda.syncthreads()
    stride = 128
    while stride > 0:
        if tid < stride:
            s[tid] += s[tid + stride]
        cuda.syncthreads()
        stride >>= 1
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


def _nb_matmul(a: Any, b: Any, c: Any, m: int, n: int, k: int) -> None:
    a_s = cuda.shared.array((16, 16), dtype=np.float32)
    b_s = cuda.shared.array((16, 16), dtype=np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * 16 + ty, cuda.blockIdx.x * 16 + tx
    acc = np.float32(0.0)
    for t in range((k + 15) // 16):
        ok_a = row < m and t * 16 + tx < k
        a_s[ty, tx] = a[row * k + t * 16 + tx] if ok_a else np.float32(0.0)
        ok_b = t * 16 + ty < k and col < n
        b_s[ty, tx] = b[(t * 16 + ty) * n + col] if ok_b else np.float32(0.0)
        cuda.syncthreads()
        for kk in range(16):
            acc += a_s[ty, kk] * b_s[kk, tx]
        cuda.syncthreads()
    if row < m and col < n:
        c[row * n + col] = acc


NUMBA_KERNELS = {
    "vector_add": _nb_vector_add,
    "block_reduce": _nb_block_reduce,
    "tiled_matmul": _nb_matmul,
}


def numba_rate(case: str) -> float:
    """Thread-statements per second of numba's simulator on the small launch of `case`:
    the interpreter's statement count for the same launch over the simulator's seconds."""
    kern = cuda.jit(NUMBA_KERNELS[case])
    size = NUMBA_SIZES[case]
    rng = np.random.default_rng(3)
    if case == "vector_add":
        a, b = rng.standard_normal(size, dtype=np.float32), rng.standard_normal(size, np.float32)
        c = np.zeros(size, np.float32)
        t0 = time.perf_counter()
        kern[size // 256, 256](a, b, c, size)
        secs = time.perf_counter() - t0
        np.testing.assert_array_equal(c, a + b)
        _, _, _, res = case_vector_add(size, 1)
    elif case == "block_reduce":
        x = rng.standard_normal(size, dtype=np.float32)
        part = np.zeros(size // 256, np.float32)
        t0 = time.perf_counter()
        kern[size // 256, 256](x, part, size)
        secs = time.perf_counter() - t0
        np.testing.assert_allclose(part, x.reshape(-1, 256).sum(axis=1), rtol=1e-4, atol=1e-4)
        _, _, _, res = case_block_reduce(size, 1)
    else:
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        c = np.zeros(size * size, np.float32)
        g = -(-size // 16)
        t0 = time.perf_counter()
        kern[(g, g), (16, 16)](a.reshape(-1), b.reshape(-1), c, size, size, size)
        secs = time.perf_counter() - t0
        np.testing.assert_allclose(c.reshape(size, size), a @ b, rtol=1e-3, atol=1e-3 * size)
        _, _, _, res = case_tiled_matmul(size, 1)
    return res.thread_statements / secs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (best time, median ratio)")
    ap.add_argument("--no-numba", action="store_true", help="skip numba's CUDA simulator")
    args = ap.parse_args(argv)
    n = 1 << 20 if args.quick else 1 << 24
    mm = 128 if args.quick else 512
    rk = 32 if args.quick else 256  # the register tile's K: few lanes, 40 statements per k
    cases = [
        ("vector_add", f"vector_add {n:,}", lambda: case_vector_add(n, args.repeat)),
        ("block_reduce", f"block_reduce {n:,}", lambda: case_block_reduce(n, args.repeat)),
        ("tiled_matmul", f"tiled_matmul {mm}^3", lambda: case_tiled_matmul(mm, args.repeat)),
        ("register_tile", f"register_tile K={rk}", lambda: case_register_tile(rk, args.repeat)),
    ]
    sim_ok = not args.no_numba and numba_simulator() is not None
    head = (
        f"{'case':<24}{'interp s':>10}{'numpy s':>10}{'ratio':>8}{'same-bits s':>12}"
        f"{'ratio':>7}{'thread-stmts/s':>16}"
    )
    print(head + (f"{'numba-sim t-s/s':>17}{'x numba':>9}" if sim_ok else ""))
    for key, name, fn in cases:
        times_i, times_n, times_s, res = fn()
        t_i = min(times_i)
        rate = res.thread_statements / t_i if t_i > 0 else 0.0
        row = (
            f"{name:<24}{t_i:>10.3f}{min(times_n):>10.4f}{_ratio(times_i, times_n):>8.0f}"
            f"{min(times_s):>12.4f}{_ratio(times_i, times_s):>7.1f}{rate:>16.3g}"
        )
        if sim_ok and key in NUMBA_KERNELS:
            sim = numba_rate(key)
            row += f"{sim:>17.3g}{rate / sim:>9.0f}"
        print(row, flush=True)
    if sim_ok:
        sizes = ", ".join(f"{k} {v:,}" for k, v in NUMBA_SIZES.items())
        print(
            f"numba-sim: numba-cuda's simulator on small launches ({sizes}; matmul is N^3), "
            "extrapolated per thread-statement (see the module docstring)."
        )


if __name__ == "__main__":
    main()
