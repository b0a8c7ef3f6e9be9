"""Time the NKI emulator against numpy doing the same math in the same process.

Run: ``.venv/bin/python bench/bench_nki_emulator.py [--quick] [--repeat N]``. Prints one row per
case: emulator seconds, numpy seconds and their ratio (lower is better). The emulator runs with
its default checks and tracing on, as users run it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from migrator.nki import language as nl
from migrator.nki import run_kernel


def matmul_kernel(lhsT: Any, rhs: Any) -> Any:
    """lhsT.T @ rhs with 128x128 stationary / 128x512 moving tiles and PSUM accumulation."""
    k_size, m_size = lhsT.shape
    n_size = rhs.shape[1]
    out = nl.ndarray((m_size, n_size), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // 128):
        for n in nl.affine_range(n_size // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // 128):
                a = nl.load(lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                b = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], value=nl.copy(acc))
    return out


def softmax_kernel(x: Any) -> Any:
    """Row softmax, one 128-row tile at a time."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(rows // 128):
        tile = nl.load(x[t * 128 : (t + 1) * 128, :])
        e = nl.exp(nl.subtract(tile, nl.max(tile, axis=1)))
        nl.store(out[t * 128 : (t + 1) * 128, :], value=nl.divide(e, nl.sum(e, axis=1)))
    return out


def add_kernel(a: Any, b: Any) -> Any:
    """Elementwise a + b in 128 x 2048 tiles."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(rows // 128):
        for c in nl.affine_range(cols // 2048):
            sl = (slice(r * 128, (r + 1) * 128), slice(c * 2048, (c + 1) * 2048))
            nl.store(out[sl], value=nl.add(nl.load(a[sl]), nl.load(b[sl])))
    return out


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


Case = tuple[str, Callable[..., Any], Callable[..., Any], list[np.ndarray]]


def cases(quick: bool) -> list[Case]:
    """(name, kernel, numpy reference, inputs) for each benchmark case."""
    rng = np.random.default_rng(0)
    mm = 512 if quick else 1024
    sm = 512 if quick else 4096
    ew = (512, 2048) if quick else (4096, 4096)  # 1M or 16M elements
    lhs = rng.standard_normal((mm, mm)).astype(np.float32)
    rhs = rng.standard_normal((mm, mm)).astype(np.float32)
    lhs16, rhs16 = lhs.astype(ml_dtypes.bfloat16), rhs.astype(ml_dtypes.bfloat16)
    sx = rng.standard_normal((sm, sm)).astype(np.float32)
    a = rng.standard_normal(ew).astype(np.float32)
    b = rng.standard_normal(ew).astype(np.float32)
    return [
        (f"matmul {mm}^3 fp32", matmul_kernel, lambda x, y: x.T @ y, [lhs, rhs]),
        (
            f"matmul {mm}^3 bf16",
            matmul_kernel,
            lambda x, y: x.astype(np.float32).T @ y.astype(np.float32),
            [lhs16, rhs16],
        ),
        (f"softmax {sm}x{sm} fp32", softmax_kernel, _softmax_np, [sx]),
        (f"add {ew[0] * ew[1] // 2**20}M fp32", add_kernel, np.add, [a, b]),
    ]


def main(argv: list[str] | None = None) -> int:
    """Run every case and print the timing table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{'case':<24} {'emulator s':>11} {'numpy s':>10} {'ratio':>8}  max|diff|")
    for name, kernel, ref, inputs in cases(args.quick):
        t_emu, (out, _) = _best(lambda k=kernel, i=inputs: run_kernel(k, *i), args.repeat)
        t_np, expected = _best(lambda r=ref, i=inputs: r(*i), args.repeat)
        diff = float(np.max(np.abs(out.astype(np.float32) - np.asarray(expected, np.float32))))
        print(f"{name:<24} {t_emu:11.4f} {t_np:10.4f} {t_emu / t_np:8.1f}x  {diff:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
