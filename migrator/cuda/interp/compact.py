"""Lane compaction: run a statement that few lanes execute over just those lanes.

Values are arrays over every lane of the batch, so `if (tid < s) s[tid] += s[tid + s];` in a
tree reduction would cost O(all lanes) per statement even when 1/128 of them are active. When
the active fraction is small, `try_compacted` gathers the active subset (the variables the
statement names, the lane geometry, the frame's control masks), runs the statement with every
lane of the subset active, and scatters changed variables back. Memory is shared, not copied:
loads and stores go to the same buffers through the gathered lane geometry.

A statement is compacted only when that is invisible to its semantics (`safety`, cached per
node): no barrier or warp/cooperative-group operation (they need the whole block / warp), no
`return` and no `break`/`continue` that leaves the statement (they would update the frame's
masks), and no reference bound to memory with per-lane addresses. `InterpOptions(compact=False)`
turns this off; the tests run the corpus both ways and require identical results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp.atomics import ATOMICS
from migrator.cuda.interp.builtins import MATH
from migrator.cuda.interp.findings import Coord
from migrator.cuda.interp.half import HALF_BUILTINS
from migrator.cuda.interp.scope import CompLV, MemLV, Var, VarLV
from migrator.cuda.interp.span import Span, put, span_of, take
from migrator.cuda.interp.values import Val

if TYPE_CHECKING:
    from migrator.cuda.interp.geometry import Geometry
    from migrator.cuda.interp.machine import Machine

COMPACT_TYPES = frozenset(
    {
        "if_statement",
        "for_statement",
        "while_statement",
        "do_statement",
        "compound_statement",
        "expression_statement",
        "switch_statement",
    }
)
MIN_LANES = 4096  # below this the gather/scatter bookkeeping costs more than it saves
MAX_FRACTION = 0.5  # compact when at most this fraction of the lanes is active
# ... a loop, whatever the lanes: gathered once, it runs every iteration over its own lanes
# only, where each masked update of a variable would blend the inactive lanes back (a probe of
# llm.c's `reduce_add_sum_kernel`: 2 of 256 lanes looping thousands of times)
MIN_LOOP_LANES = 64
SAFE_CALLS = frozenset(
    {
        *MATH,
        *HALF_BUILTINS,
        *ATOMICS,
        "printf",
        "assert",
        "__ldg",
        "__ldcg",
        "__ldca",
        "__ldcs",
        "__ldlu",
        "__ldcv",
        "__threadfence",
        "__threadfence_block",
    }  # fmt: skip
)
CASTS = frozenset({"static_cast", "reinterpret_cast", "const_cast"})
LOOPS = ("for_statement", "while_statement", "do_statement")


class LaneView:
    """The lane geometry of a subset `idx` of a parent geometry (same interface)."""

    def __init__(
        self, parent: Geometry | LaneView, idx: np.ndarray, span: Span | None = None
    ) -> None:
        self.parent = parent
        self.idx = idx
        self.span = span  # run structure of idx (span.py): gathers become strided copies
        self.grid, self.block = parent.grid, parent.block
        self.first_block, self.n_blocks = parent.first_block, parent.n_blocks
        self.block_ids = parent.block_ids
        self.threads = parent.threads
        self.lane_rows = parent.lane_rows
        self.n = int(idx.size)
        self.full = np.ones(self.n, dtype=bool)
        self._cache: dict[str, Any] = {}

    def _gather(self, key: str, value: Any) -> Any:
        if np.ndim(value) == 0:
            return value
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = take(value, self.idx, self.span)
        return v

    @property
    def lane(self) -> np.ndarray:
        """The lanes' indices in the whole batch (rows of per-lane local memory)."""
        return self._gather("lane", self.parent.lane)

    @property
    def blk(self) -> np.ndarray:
        return self._gather("blk", self.parent.blk)

    @property
    def tid(self) -> np.ndarray:
        return self._gather("tid", self.parent.tid)

    @property
    def tid16(self) -> np.ndarray:
        return self._gather("tid16", self.parent.tid16)

    def row_base(self, per: str, size: int) -> np.ndarray:
        return self._gather(f"{per}*{size}", self.parent.row_base(per, size))

    def thread_index(self, k: int) -> Any:
        return self._gather(f"t{k}", self.parent.thread_index(k))

    def block_index(self, k: int) -> Any:
        return self._gather(f"b{k}", self.parent.block_index(k))

    def coord(self, lane: int) -> Coord:
        return self.parent.coord(int(self.idx[lane]))

    def coords(self, mask: np.ndarray, limit: int = 4) -> list[Coord]:
        return [self.coord(int(i)) for i in np.flatnonzero(mask)[:limit]]


@dataclass(frozen=True)
class Safety:
    ok: bool
    names: frozenset[str]  # identifiers the statement mentions (variables to gather)


def safety(m: Machine, node: Node) -> Safety:
    """Whether `node` may run compacted, and the names it uses (cached on the program)."""
    cache: dict[int, Safety] = m.program.compact_cache
    hit = cache.get(node.id)
    if hit is None:
        names: set[str] = set()
        ok = _scan(m, node, names, 0, 0, set(), False)
        hit = cache[node.id] = Safety(ok, frozenset(names))
    return hit


def _scan(
    m: Machine, node: Node, names: set[str], loops: int, breaks: int, seen: set[str], callee: bool
) -> bool:
    """Walk the subtree; `loops`/`breaks` count enclosing loops / loops-or-switches inside it;
    in a callee's body (`callee`) a `return` ends the callee's own frame and is fine."""
    t = node.type
    if t == "identifier":
        names.add(m.parsed.text(node))
        return True
    if t == "return_statement" and not callee:
        return False
    if t == "continue_statement" and loops == 0:
        return False
    if t == "break_statement" and breaks == 0:
        return False
    if t == "call_expression" and not _call_safe(m, node, seen):
        return False
    if t in LOOPS:
        loops, breaks = loops + 1, breaks + 1
    elif t == "switch_statement":
        breaks += 1
    return all(_scan(m, c, names, loops, breaks, seen, callee) for c in node.named_children)


def _call_safe(m: Machine, node: Node, seen: set[str]) -> bool:
    fnode = node.child_by_field_name("function")
    if fnode is not None and fnode.type == "template_function":
        fnode = fnode.child_by_field_name("name")
    if fnode is None or fnode.type != "identifier":
        return False  # member calls (cooperative groups), function pointers
    name = m.parsed.text(fnode)
    device = [f for f in m.program.functions.get(name, []) if not f.is_kernel]
    if device:
        if name in seen:
            return False  # recursion: let the normal path report it
        seen.add(name)
        try:  # a callee's own names are its parameters and locals, not the caller's variables
            return all(_scan(m, f.body, set(), 0, 0, seen, True) for f in device)
        finally:
            seen.discard(name)
    return name in SAFE_CALLS or name in CASTS


def try_compacted(m: Machine, node: Node, mask: np.ndarray) -> bool:
    """Run `node` over the active lanes of `mask` only; False (nothing done) if not safe."""
    info = safety(m, node)
    if not info.ok:
        return False
    bound: list[Var] = []
    for name in info.names:
        b = m.lookup(name)
        if isinstance(b, VarLV):
            b = b.var
        if isinstance(b, Var):
            if not any(v is b for v in bound):
                bound.append(b)
        elif isinstance(b, CompLV) or (isinstance(b, MemLV) and np.ndim(b.ptr.data) > 0):
            return False  # a reference into memory at per-lane addresses
    idx = np.flatnonzero(mask)
    span = span_of(idx)
    parent = m.geo
    frame = m.frame
    saved = [(v, v.val, v.init) for v in bound]
    masks = (frame.ret, [(lp.brk, lp.cont) for lp in frame.loops])
    for v in bound:
        v.val = _gather(v.val, idx, span)
        if v.init is not None:  # lanes that stored to a variable declared uninitialised
            v.init = take(v.init, idx, span)
    gathered = [v.val for v in bound]
    frame.ret = take(frame.ret, idx, span)
    for lp in frame.loops:
        lp.brk, lp.cont = take(lp.brk, idx, span), take(lp.cont, idx, span)
    m.geo = LaneView(parent, idx, span)  # type: ignore[assignment]
    try:
        m.exec(node, m.geo.full)
    finally:
        m.geo = parent
        frame.ret = masks[0]
        for lp, (brk, cont) in zip(frame.loops, masks[1], strict=True):
            lp.brk, lp.cont = brk, cont
        for (v, old, init), g in zip(saved, gathered, strict=True):
            v.val = old if v.val is g else _scatter(old, v.val, idx, parent.n, span)
            if init is not None:
                merged = init.copy()
                merged[idx] = True if v.init is None else v.init
                v.init = None if merged.all() else merged
    return True


def _gather(v: Val, idx: np.ndarray, span: Span | None = None) -> Val:
    if v.comps is not None:
        return Val(v.ctype, comps=tuple(_gather(c, idx, span) for c in v.comps))
    if np.ndim(v.data) == 0:
        return v
    return Val(v.ctype, take(v.data, idx, span), buf=v.buf)


def _scatter(old: Val, new: Val, idx: np.ndarray, n: int, span: Span | None = None) -> Val:
    """`old` with the subset's lanes replaced by `new` (as a masked store would)."""
    if old.comps is not None and new.comps is not None:
        comps = tuple(
            _scatter(o, c, idx, n, span) for o, c in zip(old.comps, new.comps, strict=True)
        )
        return Val(old.ctype, comps=comps)
    if new.buf is not old.buf and (new.buf is not None or old.buf is not None):
        raise TypeError("pointers into different buffers selected per lane")
    nd = np.asarray(new.data)
    out = np.array(np.broadcast_to(old.data, (n,)), dtype=np.result_type(nd, old.data))
    put(out, idx, span, nd)
    return Val(new.ctype, out, buf=new.buf)
