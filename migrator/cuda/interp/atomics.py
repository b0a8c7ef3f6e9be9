"""Atomics with a documented deterministic order: ascending global linear thread id.

CUDA serialises same-address atomics in an unspecified order; we pick ascending global linear
thread id (block-major, then x-fastest thread id), which is also lane order. Each lane gets the
value the address held just before its own update ("old"), as if the updates ran one by one.

Vectorised application: lanes are grouped by address (stable sort keeps thread order); lanes of
equal rank within their group touch distinct addresses, so rank r of every group is applied in
one numpy step. Groups larger than `RANK_LIMIT` (a global counter, a histogram hot bin) use a
per-group `ufunc.accumulate` in the storage dtype, which is sequential and therefore exact (a
float32 sum accumulates in float32 in thread order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_, memory
from migrator.cuda.interp.values import Val, convert, lanes

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine

RANK_LIMIT = 64

# op -> (combine(old, v), ufunc for the grouped path or None)
OPS: dict[str, tuple[Callable[[Any, Any], Any], np.ufunc | None]] = {
    "add": (np.add, np.add),
    "sub": (np.subtract, None),
    "max": (np.maximum, np.maximum),
    "min": (np.minimum, np.minimum),
    "exch": (lambda old, v: v, None),
    "and": (np.bitwise_and, np.bitwise_and),
    "or": (np.bitwise_or, np.bitwise_or),
    "xor": (np.bitwise_xor, np.bitwise_xor),
    # atomicInc/Dec (unsigned): wrap to 0 past `v`, and to `v` from 0 or above it
    "inc": (lambda old, v: np.where(old >= v, 0, old + 1).astype(old.dtype), None),
    "dec": (lambda old, v: np.where((old == 0) | (old > v), v, old - 1).astype(old.dtype), None),
}


def _apply(m: Machine, op: str, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    ptr = args[0]
    if not ptr.ctype.is_pointer_like or ptr.ctype.elem is None:
        raise m.error(node, "atomic on a non-pointer")
    t = ptr.ctype.elem
    if t.kind == "vec":
        return _apply_vector(m, op, args, mask, node)
    if t.kind not in ("int", "float", "bool"):
        raise m.unsupported(node, f"atomic on {t}")
    buf, idx, flat, *_ = memory._resolve(m, ptr, t, mask, node, write=True)
    if buf.init is not None:
        buf.init[flat] = True
    if m.options.writers:
        memory.note_writers(m, buf, flat, idx)
    if m.options.stores:
        memory.note_stored(buf, flat)
    active = np.arange(m.geo.n) if idx is None else idx
    old_out = np.zeros(m.geo.n, dtype=buf.data.dtype)
    if op == "cas":
        cmp = lanes(convert(args[1], t), m.geo.n)[active]
        vals = lanes(convert(args[2], t), m.geo.n)[active]
    else:
        cmp = None
        vals = lanes(convert(args[1], t), m.geo.n)[active]
    order = np.argsort(flat, kind="stable")
    fs, vs = flat[order], vals[order]
    starts = np.r_[True, fs[1:] != fs[:-1]] if len(fs) else np.zeros(0, dtype=bool)
    start_idx = np.flatnonzero(starts)
    group = np.cumsum(starts) - 1
    rank = np.arange(len(fs)) - start_idx[group] if len(fs) else np.zeros(0, dtype=np.int64)
    sizes = np.diff(np.r_[start_idx, len(fs)])
    olds = np.empty(len(fs), dtype=buf.data.dtype)
    combine, ufunc = OPS.get(op, (None, None))
    big = sizes[group] > RANK_LIMIT if ufunc is not None else np.zeros(len(fs), dtype=bool)
    if big.any():
        assert ufunc is not None
        for g in np.unique(group[big]):
            s, e = start_idx[g], start_idx[g] + sizes[g]
            seq = np.concatenate([buf.data[fs[s : s + 1]], vs[s:e]]).astype(buf.data.dtype)
            acc = ufunc.accumulate(seq, dtype=buf.data.dtype)
            olds[s:e] = acc[:-1]
            buf.data[fs[s]] = acc[-1]
    small = ~big
    if ufunc is not None and vs.dtype == buf.data.dtype:
        if small.any():
            _accumulate_ranks(
                buf.data, ufunc, fs[small], vs[small], rank[small], starts[small], olds, small
            )
        max_rank = 0  # (every group applied: no rank by rank below)
    else:
        max_rank = int(rank[small].max()) + 1 if small.any() else 0
    for r in range(max_rank):
        sel = small & (rank == r)
        a = fs[sel]
        old = buf.data[a]
        olds[sel] = old
        if op == "cas":
            assert cmp is not None
            c = cmp[order][sel]
            buf.data[a] = np.where(old == c, vs[sel], old)
        else:
            assert combine is not None
            buf.data[a] = combine(old, vs[sel])
    old_out[active[order]] = olds
    return Val(t, old_out)


def _accumulate_ranks(
    data: np.ndarray,
    ufunc: np.ufunc,
    fs: np.ndarray,
    vs: np.ndarray,
    rank: np.ndarray,
    starts: np.ndarray,
    olds: np.ndarray,
    where: np.ndarray,
) -> None:
    """Every group's updates at once, still one by one in thread order: row g of a matrix holds
    the value at group g's address and then its lanes' values by rank; `ufunc.accumulate` along
    the rows is sequential in the storage dtype, so entry r is what lane r found ("old") and the
    row's last real entry is the final value, bit for bit the rank-by-rank result. A row's
    padding comes after its real entries and is never read. (Groups are small here: at most
    `RANK_LIMIT` lanes, so the matrix is at most that many columns wide.)"""
    g = np.cumsum(starts) - 1
    n_groups = int(g[-1]) + 1
    first = fs[starts]
    mat = np.zeros((n_groups, int(rank.max()) + 2), dtype=data.dtype)
    mat[:, 0] = data[first]
    mat[g, rank + 1] = vs
    acc = ufunc.accumulate(mat, axis=1, dtype=data.dtype)
    olds[where] = acc[g, rank]
    data[first] = acc[np.arange(n_groups), np.bincount(g, minlength=n_groups)]


def _apply_vector(m: Machine, op: str, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """`atomicAdd(__nv_bfloat162*, v)`, `atomicAdd(float4*, v)`: CUDA makes each component
    atomic on its own (not the vector as one access), so each is an atomic of its element."""
    ptr, v = args
    t = ptr.ctype.elem
    assert t is not None and t.elem is not None
    if op != "add" or v.ctype != t or v.comps is None or ptr.buf is None:
        raise m.unsupported(node, f"atomic {op} on {t} with a {v.ctype} operand")
    if t.elem.size % ptr.buf.elem.size:
        raise m.unsupported(node, f"atomic on {t} in a {ptr.buf.elem} buffer")
    step = t.elem.size // ptr.buf.elem.size
    ptr_t = ctypes_.ptr(t.elem)
    memory._resolve(m, ptr, t, mask, node, write=True)  # bounds and alignment of the whole
    olds = tuple(
        _apply(m, op, [Val(ptr_t, ptr.data + k * step, buf=ptr.buf), comp], mask, node)
        for k, comp in enumerate(v.comps)
    )
    return Val(t, comps=olds)


def _atomic(op: str) -> Callable[..., Val]:
    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        return _apply(m, op, args, mask, node)

    call.__doc__ = f"atomic{op.capitalize()}: returns the old value; order by thread id"
    return call


ATOMICS: dict[str, Callable[..., Val]] = {
    "atomicAdd": _atomic("add"),
    "atomicSub": _atomic("sub"),
    "atomicMax": _atomic("max"),
    "atomicMin": _atomic("min"),
    "atomicExch": _atomic("exch"),
    "atomicAnd": _atomic("and"),
    "atomicOr": _atomic("or"),
    "atomicXor": _atomic("xor"),
    "atomicCAS": _atomic("cas"),
    "atomicInc": _atomic("inc"),
    "atomicDec": _atomic("dec"),
}
