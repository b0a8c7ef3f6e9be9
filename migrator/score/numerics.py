"""The cross-platform numerics policy (peers.md §4) and the error metrics.

Errors are measured against the truth: the CUDA original evaluated in float64
(``InterpOptions(shadow_f64=True)``). The CUDA original itself in float32 (the oracle) has an
inherent error; a candidate passes an output when both hold:

1. norm criterion:   relL2(candidate, truth) <= K_NORM * relL2(cuda_fp32, truth) + FLOOR[dtype]
2. element criterion: |c - t| <= K_ELEM * |o - t| + rtol[dtype] * |t| + atol[dtype] * max(1, max|t|)
   for every element (the atol term scales with the output's magnitude because sums that
   cancel to ~0 carry the rounding error of their largest terms);

and every element where the candidate is non-finite is non-finite in the CUDA original too
(overflow that the original also suffers is not the candidate's fault; being more accurate is
never penalised).

Why these numbers. K_NORM = 4: FlashAttention's tests use 2 for the *same* algorithm in low
precision; a migration reorders reductions (tree / warp-shuffle on CUDA vs sequential free-axis
or PE-array + PSUM accumulation on Trainium), whose typical error differs by a small factor, so
we allow 4. FLOOR covers reorderings when the CUDA original happens to be nearly exact
(elementwise kernels are correctly rounded, error <= 0.5 ulp): 2^7 unit roundoffs for float32,
where it stays orders of magnitude below the error of a real bug, ~4 for low precision, where
the output's own rounding dominates. rtol/atol are the migrator's check
tolerances (`migrator.check.TOLERANCE`), validated on every corpus reference. K_ELEM = 4 lets an
element be wrong by a few times the original's own error at that element.

The three-way error ratio (Neuron equivalence method) is reported when the candidate computes
in lower precision than float32: ||c - t|| / ||o_low - t|| where o_low is the CUDA original run
on inputs rounded to that precision with its outputs rounded too; <= 1.2 is excellent,
1.2-2 marginal, >> 2 a bug.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from migrator.check import TOLERANCE
from migrator.contract import np_dtype

K_NORM = 4.0
K_ELEM = 4.0
FLOOR: dict[str, float] = {
    "float32": 1e-5,  # ~2^7 unit roundoffs (u = 2^-24): covers reordered reductions
    # low precision: ~4 u; rounding the output itself already costs up to u per element
    "float16": 2e-3,  # u = 2^-11
    "bfloat16": 1.6e-2,  # u = 2^-8
    "float8_e4m3": 0.25,  # u = 2^-4
    "float8_e5m2": 0.5,  # u = 2^-3
}
ULP_BUCKETS = ("0", "1", "2", "3-4", "5-16", "17-256", "257-65536", ">65536")


def policy_table() -> dict[str, float]:
    """The documented constants, flattened for the report."""
    out = {"k_norm": K_NORM, "k_elem": K_ELEM}
    for dt, floor in FLOOR.items():
        rtol, atol = TOLERANCE.get(dt, (1e-4, 1e-5))
        out[f"floor_rel_l2.{dt}"] = floor
        out[f"rtol.{dt}"] = rtol
        out[f"atol.{dt}"] = atol
    return out


def _ordered_int(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Map floats of dtype `dt` to integers whose difference counts ulps (sign-magnitude fix)."""
    bits = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]
    i = np.asarray(x, dtype=dt).view(bits).astype(np.int64)
    top = np.int64(1) << (8 * dt.itemsize - 1)
    return np.where(i < 0, -(i + top), i)


def ulp_distance(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """|a - b| in units in the last place of `dtype` (both rounded to it first)."""
    dt = np_dtype(dtype)
    if dt.kind not in "fV":
        return np.abs(a.astype(np.int64) - b.astype(np.int64))
    with np.errstate(invalid="ignore", over="ignore"):
        ia = _ordered_int(np.asarray(a, np.float64).astype(dt), dt)
        ib = _ordered_int(np.asarray(b, np.float64).astype(dt), dt)
    return np.abs(ia - ib)


def spacing(x: float, dtype: str) -> float:
    """The ulp of `dtype` at magnitude `x` (ml_dtypes' finfo covers bf16 and fp8)."""
    import ml_dtypes

    info = ml_dtypes.finfo(np_dtype(dtype))
    x = max(abs(float(x)), float(info.tiny))
    return float(info.eps) * 2.0 ** np.floor(np.log2(x))


def ulp_histogram(ulps: np.ndarray) -> dict[str, int]:
    edges = [(0, 0), (1, 1), (2, 2), (3, 4), (5, 16), (17, 256), (257, 65536)]
    hist = {
        name: int(((ulps >= lo) & (ulps <= hi)).sum())
        for name, (lo, hi) in zip(ULP_BUCKETS, edges, strict=False)
    }
    hist[">65536"] = int((ulps > 65536).sum())
    return hist


def _rel_l2(x: np.ndarray, t: np.ndarray) -> float:
    d = float(np.linalg.norm(x - t))
    n = float(np.linalg.norm(t))
    if d == 0.0:
        return 0.0
    return d / n if n > 0 else float("inf")


@dataclass
class Comparison:
    max_abs: float
    max_rel: float
    rel_l2: float
    cuda_rel_l2: float
    allowed_rel_l2: float
    max_ulp: int
    cuda_max_ulp: int
    scale_ulp: float
    histogram: dict[str, int]
    beyond: int
    nonfinite_mismatch: int
    elements: int
    ok: bool


def _compare_exact(cand: np.ndarray, oracle: np.ndarray, dt: np.dtype) -> Comparison:
    """An integer output against the CUDA original, element by element in `dt` (64-bit values
    are not rounded through float64); a candidate value that is not an integer of `dt`
    (a fraction, out of its range) is wrong."""
    n = oracle.size
    if cand.dtype.kind in "iub":
        with np.errstate(over="ignore"):
            fits = (cand.astype(dt).astype(cand.dtype) == cand) if cand.size else cand.astype(bool)
        c = cand.astype(dt)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            cf = cand.astype(np.float64)
            info = np.iinfo(dt) if dt.kind != "b" else None
            fits = np.isfinite(cf) & (cf == np.round(cf))
            if info is not None:
                fits &= (cf >= info.min) & (cf <= info.max)
            c = np.where(fits, cf, 0).astype(dt)
    o = oracle.astype(dt)
    wrong = ~fits | (c != o)
    bad = int(wrong.sum())
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs(c.astype(np.float64) - o.astype(np.float64))
    err = np.where(fits, err, np.inf)
    worst = float(err.max(initial=0.0))
    hist = ulp_histogram(np.where(np.isfinite(err), err, 2**62).astype(np.int64))
    rel = _rel_l2(c.astype(np.float64), o.astype(np.float64)) if fits.all() else float("inf")
    return Comparison(worst, 0.0, rel, 0.0, 0.0, int(min(worst, 2**62)), 0, 0.0, hist, bad, 0, n,
                      bad == 0)  # fmt: skip


def compare(cand: np.ndarray, oracle: np.ndarray, truth: np.ndarray, dtype: str) -> Comparison:
    """Apply the policy to one output. `oracle` is the CUDA fp32 result rounded to `dtype`."""
    dt = np_dtype(dtype)
    if dt.kind in "iub":  # integer outputs are exact: C's values in the output's own type
        return _compare_exact(np.asarray(cand).ravel(), np.asarray(oracle).ravel(), dt)
    c = np.asarray(cand, dtype=np.float64).ravel()
    o = np.asarray(oracle, dtype=np.float64).ravel()
    t = np.asarray(truth, dtype=np.float64).ravel()
    n = t.size
    with np.errstate(invalid="ignore", over="ignore"):
        # where the truth overflows the output dtype, the rounded truth is the reference value
        t_out = t.astype(dt).astype(np.float64)
    fin_c, fin_o, fin_t = np.isfinite(c), np.isfinite(o), np.isfinite(t_out)
    # non-finite candidate elements are acceptable only where the CUDA original is non-finite
    nf_mismatch = int((~fin_c & fin_o).sum())
    both = fin_c & fin_t
    cc, tt = c[both], t[both]
    oo = np.where(fin_o[both], o[both], tt)  # a non-finite oracle gives no error budget
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(cc - tt)
        odiff = np.abs(oo - tt)
        rel = diff / np.maximum(np.abs(tt), np.finfo(np.float32).tiny)
        rtol, atol = TOLERANCE.get(dtype, (1e-4, 1e-5))
        scale = max(1.0, float(np.abs(tt).max(initial=0.0)))
        allowed = K_ELEM * odiff + rtol * np.abs(tt) + atol * scale
        beyond = int((diff > allowed).sum()) + nf_mismatch
    # finite candidate where the truth overflows the dtype and the CUDA original is finite:
    # wrong, unless it is exactly what the CUDA original computes there
    finite_vs_inf = fin_c & ~fin_t & fin_o & (c != o)
    beyond += int(finite_vs_inf.sum())
    rel_l2 = _rel_l2(cc, tt)
    cuda_rel_l2 = _rel_l2(oo, tt)
    floor = FLOOR.get(dtype, FLOOR["float32"])
    allowed_l2 = K_NORM * cuda_rel_l2 + floor
    ulps = ulp_distance(c[both], t[both], dtype)
    culps = ulp_distance(oo, tt, dtype)
    ok = beyond == 0 and rel_l2 <= allowed_l2
    return Comparison(
        max_abs=float(diff.max(initial=0.0)),
        max_rel=float(rel.max(initial=0.0)),
        rel_l2=rel_l2,
        cuda_rel_l2=cuda_rel_l2,
        allowed_rel_l2=allowed_l2,
        max_ulp=int(ulps.max(initial=0)),
        cuda_max_ulp=int(culps.max(initial=0)),
        scale_ulp=float(diff.max(initial=0.0)) / spacing(scale, dtype),
        histogram=ulp_histogram(ulps),
        beyond=beyond,
        nonfinite_mismatch=nf_mismatch,
        elements=n,
        ok=ok,
    )


def error_ratio(cand: np.ndarray, low_oracle: np.ndarray, truth: np.ndarray) -> float | None:
    """Three-way ratio ||c - t|| / ||o_low - t|| over elements finite in all three."""
    c, o, t = (np.asarray(a, dtype=np.float64).ravel() for a in (cand, low_oracle, truth))
    m = np.isfinite(c) & np.isfinite(o) & np.isfinite(t)
    den = float(np.linalg.norm(o[m] - t[m]))
    num = float(np.linalg.norm(c[m] - t[m]))
    if den == 0.0:
        return None if num == 0.0 else float("inf")
    return num / den


def reduction_feedback(n: int, dtype: str, cuda_order: str, nki_order: str, ulp: int) -> str:
    """Explain an accumulation-order difference with the expected size (peers.md §4.3)."""
    bits = int(np.ceil(np.log2(max(n, 2))))
    typical = int(np.ceil(np.sqrt(n)))
    return (
        f"{cuda_order} vs {nki_order} over n={n} terms: floating-point addition is not "
        f"associative, so results differ in the last bits; expected <= ~{bits} ulp of sum|x| "
        f"for a tree order and ~{typical} ulp typical (<= {n} worst case) for a sequential "
        f"order; measured max error {ulp} ulp of the output's largest magnitude ({dtype})."
    )
