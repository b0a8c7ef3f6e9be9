"""Scatter-adds: a float output that adds rows of an input at rows an integer tensor names
(an embedding's backward: `atomicAdd(&dwte[ix * C + c], dout[k * C + c])` with `ix = inp[k]`),
fitted from a traced run.

Each output element is a sum of input elements whose number and positions follow the data (the
tokens that carry each id), so no index map of the coordinates fits it. Like a histogram, it is
fitted by value instead: the traced output, less its old value where it is in place, is compared
with the one-hot scatter of each float input's rows by each integer input. The first that
reproduces it becomes

    out[i, j] = out[i, j] + sum_{k < K} (ids[k] == i ? x[k, j] : 0)

(`i // C` and `i % C` for a flat output), and, like every fit, is verified against the CUDA
interpreter at other sizes before use.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from migrator.lift.program import Assign, Expr, IndexMap, LiftError, Term


def fit_scatter(
    name: str,
    out: np.ndarray,
    old: np.ndarray | None,
    shapes: Mapping[str, tuple[int, ...]],
    floats: Mapping[str, np.ndarray],
    ints: Mapping[str, np.ndarray],
) -> Assign:
    """The scatter-add program of the float output `name` (`out`: its traced values as numbers,
    `old`: its values before the run where it is in place); raises LiftError when no float
    input's rows scattered by an integer input give it."""
    got = np.asarray(out, dtype=np.float64).reshape(-1)
    base = np.zeros_like(got) if old is None else np.asarray(old, np.float64).reshape(-1)
    delta = got - base
    if not np.isfinite(delta).all() or not delta.any():
        raise LiftError(f"{name} is no scatter-add (unwritten or unchanged elements)")
    scale = max(1.0, float(np.abs(delta).max()))
    for key, ids in ints.items():
        k = np.asarray(ids).astype(np.int64).reshape(-1)
        n = k.size
        if n < 2 or key == name:
            continue
        for xname, x in floats.items():
            xs = np.asarray(x, dtype=np.float64).reshape(-1)
            if xname == name or xs.size % n:
                continue
            cols = xs.size // n
            if got.size % cols:
                continue
            rows = got.size // cols
            if k.min() < 0 or k.max() >= rows:
                continue
            want = np.zeros((rows, cols))
            np.add.at(want, k, xs.reshape(n, cols))
            if np.allclose(delta, want.reshape(-1), rtol=1e-4, atol=1e-6 * scale):
                return _assign(name, shapes, key, xname, n, rows, cols, old is not None)
    raise LiftError(
        f"{name}'s elements are sums over data-dependent sets of elements, and no rows of a "
        "float input added at the rows an integer input names give them"
    )


def _unravel(var: str, dims: tuple[int, ...]) -> list[IndexMap]:
    """The coordinates of the flat position `var` in a tensor of shape `dims` (row-major)."""
    maps = []
    for a in range(len(dims)):
        inner = int(np.prod(dims[a + 1 :], dtype=np.int64))
        div = inner if inner > 1 else None
        mod = dims[a] if a > 0 else None
        maps.append(IndexMap(terms=[Term(coef=1, var=var, div=div, mod=mod)]))
    return maps


def _assign(
    name: str,
    shapes: Mapping[str, tuple[int, ...]],
    key: str,
    x: str,
    n: int,
    rows: int,
    cols: int,
    carried: bool,
) -> Assign:
    out_shape = tuple(shapes[name])
    if len(out_shape) == 2 and out_shape == (rows, cols):
        vars_ = ["i", "j"]
        row = IndexMap(terms=[Term(coef=1, var="i")])
        col = IndexMap(terms=[Term(coef=1, var="j")])
        own = [row, IndexMap(terms=[Term(coef=1, var="j")])]
    elif len(out_shape) == 1:  # flat rows (one element each: a weighted histogram)
        vars_ = ["i"]
        row = IndexMap(terms=[Term(coef=1, var="i", div=cols if cols > 1 else None)])
        col = IndexMap(terms=[Term(coef=1, var="i", mod=cols)] if cols > 1 else [])
        own = [IndexMap(terms=[Term(coef=1, var="i")])]
    else:
        raise LiftError(f"{name} of shape {out_shape} is not rows of {cols} scattered by id")
    key_load = Expr(kind="load", tensor=key, index=_unravel("k", tuple(shapes[key])))
    x_shape = tuple(shapes[x])
    if len(x_shape) >= 2 and x_shape[-1] == cols:  # [..., C]: leading axes are the rows
        x_index = [*_unravel("k", x_shape[:-1]), col]
    elif len(x_shape) == 1:  # flat rows of C
        x_index = [IndexMap(terms=[Term(coef=cols, var="k"), *col.terms])]
    elif len(x_shape) >= 2 and cols == 1:  # one element per row: the whole tensor, flat
        x_index = _unravel("k", x_shape)
    else:
        raise LiftError(f"{x} of shape {x_shape} is not rows of {cols}")
    x_load = Expr(kind="load", tensor=x, index=x_index)
    here = Expr(kind="coord", index=[row])
    zero = Expr(kind="const", value=0)
    hit = Expr(kind="op", op="select", name="==", args=[key_load, here, x_load, zero])
    total: Expr = Expr(kind="reduce", op="sum", var="k", extent=n, args=[hit])
    if carried:
        total = Expr(kind="op", op="+", args=[Expr(kind="load", tensor=name, index=own), total])
    return Assign(tensor=name, vars=vars_, expr=total)
