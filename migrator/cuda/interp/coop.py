"""Cooperative groups basics: `thread_block`, `thread_block_tile<N>` (N a power of two <= 32),
their member functions, `cg::sync` and `cg::reduce`.

A group is an opaque value (`CType` kind "object"); its members map onto the primitives the
interpreter already has: `block.sync()` is `__syncthreads()` (same divergence check),
`tile.shfl_down(v, d)` is `__shfl_down_sync` with the tile's member mask and `width = N`, ranks
come from the linear thread id. `cg::reduce(tile, v, op)` follows CUDA's own implementation
(`cooperative_groups/details/coalesced_reduce.h`): a butterfly `v = op(v, tile.shfl_xor(v, m))`
for m = N/2 ... 1, so every thread of the tile gets the same, identically rounded result.

Not modelled (raises `UnsupportedError`): grid/multi-grid groups, `coalesced_threads()`, dynamic
`tiled_partition(g, n)`, tiles larger than 32, `cg::reduce` over a whole block or a partial tile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.traced import SELECT, as_object, is_traced
from migrator.cuda.interp.values import Val, convert, lanes, select
from migrator.cuda.interp.warp import WARP, WARP_SIZE

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine
    from migrator.cuda.interp.program import Function

THREAD_BLOCK = CType("thread_block", "object")
DIM3 = ct.NAMED["dim3"]
VOID = Val(ct.VOID, np.int8(0))
FUNCTORS = ("plus", "less", "greater", "bit_and", "bit_or", "bit_xor")


def tile_type(n: int) -> CType:
    return CType(f"thread_block_tile<{n}>", "object", count=n)


def group_type(name: str) -> CType | None:
    """The group type spelled `name` (namespace already stripped), or None."""
    name = name.replace(" ", "")
    if name == "thread_block":
        return THREAD_BLOCK
    if name.startswith("thread_block_tile<") and name.endswith(">"):
        inner = name[len("thread_block_tile<") : -1]
        if inner.isdigit():
            return tile_type(int(inner))
    return None


def _check_tile(m: Machine, n: int, node: Node) -> None:
    if n < 1 or n > WARP_SIZE or n & (n - 1):
        raise m.unsupported(node, f"thread_block_tile<{n}> (only powers of two up to 32)")


def _group(m: Machine, v: Val, node: Node) -> CType:
    if v.ctype.kind != "object" or v.ctype.name.startswith(FUNCTORS):
        raise m.error(node, f"expected a cooperative group, got {v.ctype}")
    return v.ctype


# --- free functions: cg::this_thread_block(), cg::tiled_partition<N>(g), cg::sync, cg::reduce ---
FreeFn = Callable[["Machine", Node, "Node | None", list[Node], np.ndarray], Val]


def _this_thread_block(
    m: Machine, node: Node, targs: Node | None, args: list[Node], mask: np.ndarray
) -> Val:
    return Val(THREAD_BLOCK, np.int8(0))


def _tiled_partition(
    m: Machine, node: Node, targs: Node | None, args: list[Node], mask: np.ndarray
) -> Val:
    if targs is None or len(args) != 1:
        raise m.unsupported(node, "tiled_partition(g, n) with a run-time size (use <N>)")
    _group(m, m.ev(args[0], mask), node)
    targ = targs.named_children[0]
    if targ.type == "type_descriptor":  # `<TILE>` parses as a type name
        t = targ.child_by_field_name("type")
        assert t is not None
        targ = t
    n = m.const_int(targ)
    _check_tile(m, n, node)
    return Val(tile_type(n), np.int8(0))


def _sync(m: Machine, node: Node, targs: Node | None, args: list[Node], mask: np.ndarray) -> Val:
    g = _group(m, m.ev(args[0], mask), node)
    return group_sync(m, g, mask, node)


def group_sync(m: Machine, g: CType, mask: np.ndarray, node: Node) -> Val:
    """`block.sync()` is a block barrier; a tile's is `__syncwarp` (lockstep: nothing to do)."""
    if g == THREAD_BLOCK:
        return m.builtins["__syncthreads"](m, [], mask, node)
    return VOID


def _functor(name: str) -> FreeFn:
    def make(m: Machine, node: Node, targs: Node | None, args: list[Node], mask: np.ndarray) -> Val:
        if targs is None or not targs.named_children:
            raise m.unsupported(node, f"cg::{name} without a template argument")
        t = m.type_of_descriptor(targs.named_children[0])
        return Val(CType(f"{name}<{t.name}>", "object", elem=t), np.int8(0))

    return make


def _reduce(m: Machine, node: Node, targs: Node | None, args: list[Node], mask: np.ndarray) -> Val:
    """`cg::reduce(tile, v, op)`: butterfly over the tile (CUDA's order of operations)."""
    if len(args) != 3:
        raise m.error(node, "cg::reduce takes (group, value, op)")
    g = _group(m, m.ev(args[0], mask), node)
    v = m.ev(args[1], mask)
    fn = _device_function(m, args[2])
    op = m.ev(args[2], mask) if fn is None else None
    if g == THREAD_BLOCK:
        raise m.unsupported(node, "cg::reduce over a thread_block (CUDA reduces tiles)")
    if op is not None and (op.ctype.kind != "object" or op.ctype.elem is None):
        raise m.unsupported(node, "cg::reduce with an operator other than cg::plus/less/... "
                            "or a __device__ function")  # fmt: skip
    n = g.count
    if m.geo.threads % n:
        raise m.unsupported(node, f"cg::reduce over a partial tile ({m.geo.threads} threads)")
    if op is not None:
        t, name = op.ctype.elem, op.ctype.name.split("<")[0]
        v = m.convert_to(v, t, node)
    lane = m.geo.lane  # tiles are aligned runs of n lanes: block sizes are multiples of n
    tile = lane // n
    part = np.bincount(tile[mask], minlength=int(tile[-1]) + 1 if lane.size else 0)
    partial = mask & (part[tile] != n)
    if partial.any():
        m.finding(
            node, "warp_mask", "cg::reduce over a tile whose threads are not all active", partial
        )
    for k in (n >> s for s in range(1, n.bit_length())):
        other = _from_lanes(v, lane ^ k, m.geo.n)
        if fn is not None:  # `cg::reduce(warp, partial, reduce_sum_max_op)`: the user's op
            v = m.call_device(fn, node, None, [], mask, values=[v, other])
        else:
            v = _combine(m, name, v, other, t, node)
    return v


def _from_lanes(v: Val, src: np.ndarray, n: int) -> Val:
    """Each lane's copy of lane `src`'s value (struct and vector values field by field)."""
    if v.comps is not None:
        return Val(v.ctype, comps=tuple(_from_lanes(c, src, n) for c in v.comps))
    return Val(v.ctype, lanes(v, n)[src])


def _device_function(m: Machine, node: Node) -> Function | None:
    """The `__device__` function a bare name passes as an operator, else None."""
    if node.type != "identifier" or m.lookup(m.parsed.text(node)) is not None:
        return None
    fns = [f for f in m.program.functions.get(m.parsed.text(node), [])
           if "__device__" in f.qualifiers and len(f.params) == 2]  # fmt: skip
    return fns[0] if fns else None


def _combine(m: Machine, name: str, a: Val, b: Val, t: CType, node: Node) -> Val:
    if name in ("less", "greater"):  # cg::less<T>()(a, b) returns the smaller: a < b ? a : b
        cmp = "<" if name == "less" else ">"
        if m.options.trace and (is_traced(a.ctype) or is_traced(b.ctype)):
            # a select node: the max (min) the kernel computes, not the element this run chose
            la, lb = as_object(lanes(a, m.geo.n)), as_object(lanes(b, m.geo.n))
            return Val(a.ctype if is_traced(a.ctype) else b.ctype, SELECT(cmp, la, lb, la, lb))
        return select(np.asarray(m.apply_binary(cmp, a, b, node).data, bool), a, b)
    sym = {"plus": "+", "bit_and": "&", "bit_or": "|", "bit_xor": "^"}[name]
    return convert(m.apply_binary(sym, a, b, node), t)


FREE: dict[str, FreeFn] = {
    "this_thread_block": _this_thread_block,
    "tiled_partition": _tiled_partition,
    "sync": _sync,
    "reduce": _reduce,
    **{name: _functor(name) for name in FUNCTORS},
}


# --- member functions ----------------------------------------------------------------------
def method(m: Machine, g: Val, name: str, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """`g.name(args)` for a group value `g`."""
    t = _group(m, g, node)
    geo = m.geo
    tid = geo.tid.astype(np.uint32)
    if name == "sync":
        return group_sync(m, t, mask, node)
    if t == THREAD_BLOCK:
        dims = {"group_index": geo.block_index, "thread_index": geo.thread_index}
        if name == "thread_rank":
            return Val(ct.UINT, tid)
        if name in ("size", "num_threads"):
            return Val(ct.UINT, np.uint32(geo.threads))
        if name in dims:
            comps = tuple(Val(ct.UINT, dims[name](k)) for k in range(3))
            return Val(DIM3, comps=comps)
        if name in ("group_dim", "dim_threads"):
            return Val(DIM3, comps=tuple(Val(ct.UINT, np.uint32(b)) for b in geo.block))
        raise m.unsupported(node, f"thread_block::{name}")
    n = t.count
    if name == "thread_rank":
        return Val(ct.UINT, tid % np.uint32(n))
    if name in ("size", "num_threads"):
        return Val(ct.UINT, np.uint32(n))
    if name == "meta_group_rank":
        return Val(ct.UINT, tid // np.uint32(n))
    if name == "meta_group_size":
        return Val(ct.UINT, np.uint32(-(-geo.threads // n)))
    member = _tile_member_mask(m, n)
    if name in ("shfl", "shfl_down", "shfl_up", "shfl_xor"):
        if len(args) != 2:
            raise m.error(node, f"{t}::{name} takes (value, lane/delta)")
        fn = WARP[{"shfl": "__shfl_sync"}.get(name, f"__{name}_sync")]
        return fn(m, [member, args[0], args[1], Val(ct.INT, np.int32(n))], mask, node)
    if name in ("any", "all", "ballot"):
        if len(args) != 1:
            raise m.error(node, f"{t}::{name} takes one predicate")
        bits = WARP["__ballot_sync"](m, [member, args[0]], mask, node).data
        first = ((tid % np.uint32(WARP_SIZE)) // np.uint32(n)) * np.uint32(n)
        own = (bits >> first) & np.uint32((1 << n) - 1)
        if name == "ballot":
            return Val(ct.UINT, own)
        if name == "any":
            return Val(ct.INT, (own != 0).astype(np.int32))
        fails = WARP["__ballot_sync"](m, [member, Val(ct.BOOL, ~_pred(m, args[0]))], mask, node)
        bad = (fails.data >> first) & np.uint32((1 << n) - 1)
        return Val(ct.INT, (bad == 0).astype(np.int32))
    raise m.unsupported(node, f"{t}::{name}")


def _pred(m: Machine, v: Val) -> np.ndarray:
    return np.broadcast_to(np.asarray(v.data != 0), (m.geo.n,))


def _tile_member_mask(m: Machine, n: int) -> Val:
    """Per lane: the warp lane mask of its tile (the `mask` of the equivalent *_sync call)."""
    lane_in_warp = (m.geo.tid % WARP_SIZE).astype(np.uint64)
    first = (lane_in_warp // np.uint64(n)) * np.uint64(n)
    bits = (np.uint64((1 << n) - 1) << first).astype(np.uint32)
    return Val(ct.UINT, bits)


def misparsed_declaration(m: Machine, expr: Node) -> tuple[CType, Node, Node | None] | None:
    """`cg::thread_block_tile<32> t;` at statement level: tree-sitter reads it as the
    expression `(cg::thread_block_tile < 32) > t` (initialised declarations are re-spelt
    `auto t = init;` before parsing, `cuda/parse.py`). Returns (type, name, init)."""
    if expr.type != "binary_expression":
        return None
    op, left, right = (expr.child_by_field_name(f) for f in ("operator", "left", "right"))
    if op is None or left is None or right is None or m.parsed.text(op) != ">":
        return None
    if left.type != "binary_expression":
        return None
    lop, lname, lsize = (left.child_by_field_name(f) for f in ("operator", "left", "right"))
    if lop is None or lname is None or lsize is None or m.parsed.text(lop) != "<":
        return None
    if m.parsed.text(lname).split("::")[-1].strip() != "thread_block_tile":
        return None
    n = m.const_int(lsize)
    _check_tile(m, n, expr)
    if right.type == "identifier":
        return tile_type(n), right, None
    if right.type == "assignment_expression":
        target, value, aop = (right.child_by_field_name(f) for f in ("left", "right", "operator"))
        plain = aop is not None and m.parsed.text(aop) == "="
        if plain and target is not None and target.type == "identifier" and value is not None:
            return tile_type(n), target, value
    return None
