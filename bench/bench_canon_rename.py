"""Canonicalising the traced rows of an online softmax, with renaming (`migrator.lift.transfer`)
against the canonicaliser alone, in the same run.

Each row is the branchy one-pass recurrence (`if (x > m) s *= exp(m - x); s += exp(x - m)`) over
its own input elements, as a traced run leaves it; every sampled element `exp(x[r, j] - m_r) /
s_r` is canonicalised, a few columns in every row (the fit's sample of a 2-D output). Without
renaming, each row's rescaling rewrites run again; with it, a row after the first is the first
row's canonical form with its elements renamed. Both must give the same canonical forms (the
keys are compared), so the ratio is the time renaming saves and nothing else.

    python bench/bench_canon_rename.py [--rows 8] [--width 32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from migrator.cuda.interp.traced import Sym
from migrator.lift.fit import Canonicaliser


def _rows(n_rows: int, width: int, seed: int = 0) -> list[list[Sym]]:
    """The traced elements `y[r, j]` of every row (a fresh trace: no value shared by rows)."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(n_rows):
        xs = [Sym.leaf("x", r * width + j, float(v)) for j, v in enumerate(rng.normal(size=width))]
        m, s = xs[0], (xs[0] - xs[0]).exp()
        for x in xs[1:]:
            grown = s * (m - x).exp() + (x - x).exp()
            s = Sym(0.0, "select", (">", x, m, grown, s + (x - m).exp()))
            m = Sym(max(m.v, x.v), "select", (">", x, m, x, m))
        out.append([(x - m).exp() / s for x in xs])
    return out


def _canon_all(rows: list[list[Sym]], cols: list[int], rename: bool) -> tuple[float, list[Any]]:
    c = Canonicaliser(rename=rename)
    t = time.perf_counter()
    got = [c(row[j]) for row in rows for j in cols]
    took = time.perf_counter() - t
    return took, [c.key(x) for x in got]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cols = sorted({0, 1, args.width // 2, args.width - 2, args.width - 1})
    plain: list[float] = []
    renamed: list[float] = []
    for _ in range(args.rounds):  # (both in turn each round, each on a fresh trace)
        t0, k0 = _canon_all(_rows(args.rows, args.width), cols, rename=False)
        t1, k1 = _canon_all(_rows(args.rows, args.width), cols, rename=True)
        assert k0 == k1, "renaming changed a canonical form"
        plain.append(t0)
        renamed.append(t1)
    a, b = statistics.median(plain), statistics.median(renamed)
    print(f"{args.rows} rows of {args.width}, {len(cols)} elements each, {args.rounds} rounds")
    print(f"  canonicaliser alone   {a:7.3f} s")
    print(f"  with renaming         {b:7.3f} s   ({a / b:.1f}x faster, same canonical forms)")


if __name__ == "__main__":
    main()
