"""Counts: an integer output that counts keys per bin (a histogram), fitted from a traced run.

A histogram kernel adds 1 at `bins[g(key)]` (`atomicAdd(&bins[keys[i] % 64], 1)`, often
privatised per block in shared memory and merged): its output is no expression over input
elements, so the traced-expression fit does not apply. Instead the output is compared with
`bincount(g(keys))` (plus the old counts for an in-place tensor) for every bin function `g` of a
small family: the key itself, `key % m`, `key & mask`, `(key >> s) & mask` and `key >> s`. The
first that reproduces the traced counts becomes

    bins[i] = bins[i] + sum_{k < N} (g(keys[k]) == i ? 1 : 0)

and, like every fit, is verified against the CUDA interpreter at other sizes before use.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from migrator.lift.program import Assign, Expr, IndexMap, LiftError, Term

MAX_BINS = 1 << 16  # more bins than this: not searched (and not a histogram NKI could hold)


def fit_counts(
    name: str,
    out: np.ndarray,
    old: np.ndarray | None,
    keys: Mapping[str, np.ndarray],
) -> Assign:
    """The histogram program of the integer output `name` (`out`: its traced values, `old`: its
    values before the run where it is in place), counting one of the integer inputs `keys`."""
    counts = np.asarray(out).astype(np.int64).reshape(-1)
    if np.asarray(out).ndim != 1:
        raise LiftError(f"{name} is an integer output of {np.asarray(out).ndim} axes (counts per "
                        "bin are lifted over one axis)")  # fmt: skip
    bins = counts.size
    if bins > MAX_BINS:
        raise LiftError(f"{name} is an integer output of {bins} elements (not counts per bin)")
    bases = [(None, np.zeros(bins, np.int64))]
    if old is not None:
        bases.insert(0, ("old", np.asarray(old).astype(np.int64).reshape(-1)))
    for base, start in bases:
        delta = counts - start
        if (delta < 0).any():
            continue
        for key_name, arr in keys.items():
            if key_name == name or arr.ndim != 1:
                continue
            k = arr.astype(np.int64)
            if delta.sum() > k.size:
                continue  # more counted than there are keys
            for expr, g in _bin_maps(key_name, k, bins):
                inside = (g >= 0) & (g < bins)
                if np.array_equal(np.bincount(g[inside], minlength=bins), delta):
                    return _assign(name, key_name, expr, k.size, base is not None)
    if bins == 1:  # a total of an integer input's values (int8 summed into an int32)
        for base, start in bases:
            for key_name, arr in keys.items():
                if (
                    key_name != name
                    and arr.ndim == 1
                    and int(counts[0] - start[0]) == int(arr.astype(np.int64).sum())
                ):
                    return _total(name, key_name, arr.size, base is not None)
    raise LiftError(
        f"{name} is an integer output whose values are no count of keys per bin "
        "(key, key % m, key & mask, key >> s of an integer input) the lifter knows"
    )


def _assign(name: str, key: str, g: Expr, n: int, carried: bool) -> Assign:
    one = Expr(kind="const", value=1)
    zero = Expr(kind="const", value=0)
    here = Expr(kind="coord", index=[IndexMap(terms=[Term(coef=1, var="i")])])
    hit = Expr(kind="op", op="select", name="==", args=[g, here, one, zero])
    count = Expr(kind="reduce", op="sum", var="k", extent=n, args=[hit])
    if carried:
        old = Expr(kind="load", tensor=name, index=[IndexMap(terms=[Term(coef=1, var="i")])])
        count = Expr(kind="op", op="+", args=[old, count])
    return Assign(tensor=name, vars=["i"], expr=count)


def _total(name: str, key: str, n: int, carried: bool) -> Assign:
    """`name[i] = (name[i] +) sum_{k < n} key[k]`: the one-element integer total of `key`."""
    value = Expr(kind="load", tensor=key, index=[IndexMap(terms=[Term(coef=1, var="k")])])
    total = Expr(kind="reduce", op="sum", var="k", extent=n, args=[value])
    if carried:  # (its one element: name[0], as a float total reads it)
        old = Expr(kind="load", tensor=name, index=[IndexMap()])
        total = Expr(kind="op", op="+", args=[total, old])
    return Assign(tensor=name, vars=["i"], expr=total)


def _bin_maps(key: str, k: np.ndarray, bins: int) -> Iterator[tuple[Expr, np.ndarray]]:
    """Candidate bin functions of the keys, the simplest first: (expression of `key[k]`, its
    values). Ties on these keys are broken by verification at other sizes."""
    load = Expr(kind="load", tensor=key, index=[IndexMap(terms=[Term(coef=1, var="k")])])

    def op(name: str, x: Expr, c: int) -> Expr:
        return Expr(kind="op", op=name, args=[x, Expr(kind="const", value=c)])

    yield load, k
    for m in range(2, 2 * bins + 1):
        yield op("mod", load, m), np.fmod(k, m)
    widths = [w for w in range(1, 17) if (1 << w) <= 2 * bins]
    for w in widths:
        yield op("and", load, (1 << w) - 1), k & ((1 << w) - 1)
    for s in range(1, 32):
        shifted = op("shr", load, s)
        yield shifted, k >> s
        for w in widths:
            yield op("and", shifted, (1 << w) - 1), (k >> s) & ((1 << w) - 1)
