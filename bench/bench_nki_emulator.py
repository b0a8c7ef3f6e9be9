"""Time the NKI emulator against numpy and against the Triton interpreter on the same math.

Run: ``.venv/bin/python bench/bench_nki_emulator.py [--quick] [--repeat N] [--no-triton]``.
Prints one row per case: emulator seconds, numpy seconds (best of the rounds), their ratio
(lower is better; the median of the per-round ratios, each round running the two back to
back), and, when ``triton`` (with ``torch``) is installed, the seconds of an equivalent Triton
kernel run by Triton's CPU interpreter (``TRITON_INTERPRET=1``), timed after the other two,
and the emulator/Triton ratio of the best times. The Triton
kernels use the same tiling as the NKI ones (128-row tiles; 128x512 matmul tiles, K step 128).
bf16 rows have no Triton figure: the 3.9 interpreter reads bf16 memory as raw integers.
The emulator runs with its default checks and tracing on, as users run it. Worked with
torch 2.13.0 (CPU wheel) and triton 3.9.0.
"""

from __future__ import annotations

import argparse
import os
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


def _timed(fns: list[Callable[[], Any]], repeat: int) -> tuple[list[list[float]], list[Any]]:
    """Seconds of every run of each function, and each one's last result. The functions run in
    turn in every round: this shared machine's speed drifts over seconds, and interleaving
    exposes all of them to the same drift instead of timing one in a quiet minute and the
    other in a busy one."""
    times: list[list[float]] = [[] for _ in fns]
    results: list[Any] = [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            results[i] = fn()
            times[i].append(time.perf_counter() - start)
    return times, results


def _ratio(num: list[float], den: list[float]) -> float:
    """Median over rounds of the per-round ratio (each pair ran back to back)."""
    return float(np.median(np.asarray(num) / np.asarray(den)))


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


# -- Triton equivalents (interpreter mode, CPU) -------------------------------------------------
TritonRunner = Callable[[list[np.ndarray]], np.ndarray]


def triton_runners() -> tuple[dict[str, TritonRunner], str]:
    """Triton versions of the cases keyed by kernel, or ({}, why) when Triton is unavailable."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        import torch
        import triton
        import triton.language as tl
    except Exception as exc:  # ImportError, or a broken install
        return {}, f"Triton column skipped: cannot import triton/torch ({exc.__class__.__name__})"
    if os.environ.get("TRITON_INTERPRET") != "1":
        return {}, "Triton column skipped: TRITON_INTERPRET is not 1 (no GPU runs here)"

    @triton.jit
    def add_t(x, y, o, n, BLOCK: tl.constexpr):  # noqa: N803 - Triton constexpr spelling
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(o + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    @triton.jit
    def softmax_t(x, o, cols, ROWS: tl.constexpr, COLS: tl.constexpr):  # noqa: N803
        r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
        c = tl.arange(0, COLS)[None, :]
        t = tl.load(x + r * cols + c)
        e = tl.exp(t - tl.max(t, axis=1)[:, None])
        tl.store(o + r * cols + c, e / tl.sum(e, axis=1)[:, None])

    @triton.jit
    def matmul_t(a, b, o, m_size, n_size, k_size, BM: tl.constexpr, BN: tl.constexpr,  # noqa: N803
                 BK: tl.constexpr):  # fmt: skip
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, k_size, BK):
            rk = k + tl.arange(0, BK)
            # a is lhsT [K, M]: load the [BM, BK] block transposed, as the NKI kernel does
            at = tl.load(a + rk[None, :] * m_size + rm[:, None])
            bt = tl.load(b + rk[:, None] * n_size + rn[None, :])
            acc += tl.dot(at, bt)
        tl.store(o + rm[:, None] * n_size + rn[None, :], acc)

    def tensor(x: np.ndarray) -> Any:
        if x.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(x)

    def run_add(inputs: list[np.ndarray]) -> np.ndarray:
        x, y = (tensor(i).reshape(-1) for i in inputs)
        o = torch.empty_like(x)
        add_t[(triton.cdiv(x.numel(), 4096),)](x, y, o, x.numel(), BLOCK=4096)
        return o.reshape(inputs[0].shape).numpy()

    def run_softmax(inputs: list[np.ndarray]) -> np.ndarray:
        x = tensor(inputs[0])
        o = torch.empty_like(x)
        rows, cols = x.shape
        softmax_t[(rows // 128,)](x, o, cols, ROWS=128, COLS=cols)
        return o.numpy()

    def run_matmul(inputs: list[np.ndarray]) -> np.ndarray:
        a, b = (tensor(i) for i in inputs)
        k_size, m_size = a.shape
        n_size = b.shape[1]
        o = torch.empty((m_size, n_size), dtype=torch.float32)
        grid = (m_size // 128, n_size // 512)
        matmul_t[grid](a, b, o, m_size, n_size, k_size, BM=128, BN=512, BK=128)
        return o.numpy()

    runners = {"add": run_add, "softmax": run_softmax, "matmul": run_matmul}
    return runners, f"Triton interpreter: triton {triton.__version__}, torch {torch.__version__}"


def main(argv: list[str] | None = None) -> int:
    """Run every case and print the timing table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-triton", action="store_true", help="skip the Triton column")
    args = parser.parse_args(argv)
    runners, note = ({}, "Triton column skipped (--no-triton)")
    if not args.no_triton:
        runners, note = triton_runners()
    print(note)
    head = f"{'case':<24} {'emulator s':>11} {'numpy s':>10} {'emu/np':>8}"
    print(head + (f" {'triton s':>10} {'emu/triton':>10}" if runners else "") + "  max|diff|")
    for name, kernel, ref, inputs in cases(args.quick):
        runner = runners.get(name.split()[0])
        if any(i.dtype == ml_dtypes.bfloat16 for i in inputs):
            # The Triton 3.9 interpreter loads bf16 memory as raw integers (results ~1e11 off),
            # so there is no valid Triton-interpreter figure for bf16.
            runner = None
        fns = [
            lambda k=kernel, i=inputs: run_kernel(k, *i),
            lambda r=ref, i=inputs: r(*i),
        ]
        times, results = _timed(fns, args.repeat)
        if runner is not None:
            # Timed apart, after the emulator/numpy rounds: torch's worker threads keep
            # spinning after a Triton run and would slow whatever runs next.
            tri_times, tri_results = _timed([lambda f=runner, i=inputs: f(i)], args.repeat)
            time.sleep(0.5)  # ...so they go idle before the next case
            times += tri_times
            results += tri_results
        (out, _), expected = results[0], results[1]
        diff = float(np.max(np.abs(out.astype(np.float32) - np.asarray(expected, np.float32))))
        ratio = _ratio(times[0], times[1])
        row = f"{name:<24} {min(times[0]):11.4f} {min(times[1]):10.4f} {ratio:8.1f}x"
        if runners:
            if runner is None:
                row += f" {'-':>10} {'-':>10}"
            else:
                tri_diff = float(np.max(np.abs(results[2] - np.asarray(expected, np.float32))))
                diff = max(diff, tri_diff)
                row += f" {min(times[2]):10.4f} {min(times[0]) / min(times[2]):9.2f}x"
        print(f"{row}  {diff:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
