"""Names in scope, lvalues, and per-call control state (returns, breaks, continues).

An lvalue is anything that can be loaded and stored under a lane mask: a local variable (`VarLV`,
masked update with `np.where`), memory (`MemLV`, a checked load/store) or one component of a
vector (`CompLV`). Reference parameters of inlined `__device__` functions bind the caller's
lvalue itself, so `acc += v` in the callee updates the caller's variable for the active lanes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from migrator.cuda.interp import memory
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.findings import InterpError
from migrator.cuda.interp.values import Val, from_bytes, select, to_bytes

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine


class LValue(Protocol):
    ctype: CType

    def load(self, m: Machine, mask: np.ndarray, node: object) -> Val: ...

    def store(self, m: Machine, v: Val, mask: np.ndarray, node: object) -> None: ...


@dataclass
class Var:
    """A named local (or by-value parameter); `val` is replaced on every masked store."""

    ctype: CType
    val: Val
    const: bool = False
    # declared without an initialiser: lanes that have stored to it so far (None: all have),
    # and its name for the `uninitialized_read` finding
    init: np.ndarray | None = None
    name: str = ""

    def check_read(self, m: Machine, mask: np.ndarray, node: object) -> None:
        """Report lanes of `mask` reading this variable before storing to it."""
        if self.init is None:
            return
        bad = mask & ~self.init
        if bad.any():
            m.finding(node, "uninitialized_read", f"read of uninitialised local {self.name!r}", bad)
            self.init = self.init | bad  # report each lane once; it now holds poison

    def mark_stored(self, mask: np.ndarray) -> None:
        if self.init is not None:
            init = self.init | mask
            self.init = None if init.all() else init


@dataclass
class VarLV:
    var: Var

    @property
    def ctype(self) -> CType:
        return self.var.ctype

    def load(self, m: Machine, mask: np.ndarray, node: object) -> Val:
        self.var.check_read(m, mask, node)
        return self.var.val

    def peek(self, m: Machine, mask: np.ndarray, node: object) -> Val:
        """The value without counting as a read (a component store rewrites the rest)."""
        return self.var.val

    def store(self, m: Machine, v: Val, mask: np.ndarray, node: object) -> None:
        if self.var.ctype.kind == "array":
            raise m.error(node, "assignment to an array")
        # lanes outside the mask keep their old value: a masked update, never a plain store
        old = self.var.val
        if m.active_count(mask) == mask.size:
            self.var.val = v
        elif (
            v.buf is not old.buf
            and old.buf is None
            and self.var.init is not None
            and not (self.var.init & ~mask).any()
        ):
            # `float* p;` then `p = ...` by some lanes: the others hold no pointer yet (reading
            # theirs is reported as an uninitialised read), so the buffer is the stored one's
            self.var.val = v
        else:
            try:
                self.var.val = select(mask, v, old)
            except TypeError as e:  # a pointer into another buffer per lane
                raise m.unsupported(node, str(e)) from e
        self.var.mark_stored(mask)


@dataclass
class ViewLV:
    """Element `index` of a local variable's bytes seen as an array of `ctype`
    (`reinterpret_cast<const float*>(&v4)[i]`, `FLOAT4(x_val)`): loads bit-cast the variable,
    stores rewrite the chosen element's bytes and leave the rest."""

    inner: LValue
    ctype: CType
    index: Val

    def _parts(self, m: Machine, whole: Val) -> np.ndarray:
        n = m.geo.n
        b = to_bytes(whole, n)
        k = b.shape[1] // self.ctype.size
        return b.reshape(n, k, self.ctype.size)

    def _index(self, m: Machine, k: int, mask: np.ndarray, node: object) -> np.ndarray:
        i = np.broadcast_to(np.asarray(self.index.data, dtype=np.int64), (m.geo.n,))
        bad = mask & ((i < 0) | (i >= k))
        if bad.any():
            raise m.error(node, f"element {int(i[bad][0])} of a {k}-element view of a local")
        return np.where(mask, i, 0)

    def load(self, m: Machine, mask: np.ndarray, node: object) -> Val:
        whole = self.inner.load(m, mask, node)
        groups = self._regrouped(whole)
        if groups is not None:
            return self._grouped_load(m, *groups, mask, node)
        if _traced(whole):
            raise self._escape(whole)
        parts = self._parts(m, whole)
        i = self._index(m, parts.shape[1], mask, node)
        return from_bytes(parts[np.arange(m.geo.n), i], self.ctype)

    # A view of the same scalar type (`FLOAT4(v)` over a float4, `(float4*)&f[0]` over floats,
    # `payload[k]` of a packed struct's array) regroups components: the bytes say the same, and
    # traced values have none; any other view of a traced value escapes the trace.
    def _regrouped(self, whole: Val) -> tuple[list[Val], int] | None:
        mine, theirs = _scalars(whole), _scalars_of(self.ctype)
        if (
            mine is None
            or theirs is None
            or len(mine) % len(theirs)
            or any(c.ctype.name != t.name for c in mine for t in theirs[:1])
            or any(t.name != theirs[0].name for t in theirs)
        ):
            return None
        return mine, len(theirs)

    def _escape(self, whole: Val) -> Exception:
        from migrator.cuda.interp.traced import TraceEscape

        return TraceEscape(f"traced {whole.ctype} viewed as {self.ctype}")

    def _group_of(self, m: Machine, groups: int, mask: np.ndarray, node: object) -> int | None:
        """The group a uniform index picks (checked where any lane is active); None for an
        index per lane."""
        d = self.index.data
        if np.ndim(d) != 0:
            # (a loop counter every lane holds the same value of: stored per lane once a
            # masked `++k` wrote it)
            if not isinstance(d, np.ndarray) or d.ndim != 1 or not d.size or d.dtype == object:
                return None
            if not (d == d[0]).all():
                return None
            d = d[0]
        g = int(d)
        if not 0 <= g < groups and mask.any():
            raise m.error(node, f"element {g} of a {groups}-element view of a local")
        return g if 0 <= g < groups else 0

    def _grouped_load(
        self, m: Machine, comps: list[Val], w: int, mask: np.ndarray, node: object
    ) -> Val:
        g = self._group_of(m, len(comps) // w, mask, node)
        if g is not None:  # (one index for every lane: the loop counter of `acc[k] += s[k]`)
            picked = [Val(c.ctype, c.data) for c in comps[g * w : (g + 1) * w]]
        else:
            i = self._index(m, len(comps) // w, mask, node)
            picked = []
            for j in range(w):
                data = comps[j].data
                for g2 in range(1, len(comps) // w):
                    data = np.where(i == g2, comps[g2 * w + j].data, data)
                picked.append(Val(comps[j].ctype, data))
        if self.ctype.kind == "vec":
            return Val(self.ctype, comps=tuple(picked))
        return Val(self.ctype, picked[0].data)

    def _grouped_store(
        self, m: Machine, old: Val, comps: list[Val], w: int, new: list[Val], mask: np.ndarray,
        node: object,
    ) -> None:  # fmt: skip
        out = [c.data for c in comps]
        g = self._group_of(m, len(comps) // w, mask, node)
        if g is not None:
            for j in range(w):
                out[g * w + j] = np.where(mask, new[j].data, out[g * w + j])
        else:
            i = self._index(m, len(comps) // w, mask, node)
            for g2 in range(len(comps) // w):
                hit = mask & (i == g2)
                for j in range(w):
                    out[g2 * w + j] = np.where(hit, new[j].data, out[g2 * w + j])
        vals = [Val(c.ctype, d) for c, d in zip(comps, out, strict=True)]
        whole = Val(old.ctype, comps=tuple(vals)) if old.comps is not None else vals[0]
        self.inner.store(m, whole, mask, node)

    def store(self, m: Machine, v: Val, mask: np.ndarray, node: object) -> None:
        old = _peek(self.inner, m, mask, node)
        groups = self._regrouped(old)
        new = _scalars(v)
        if (
            groups is not None
            and new is not None
            and len(new) == groups[1]
            and all(x.ctype.name == groups[0][0].ctype.name for x in new)
        ):
            return self._grouped_store(m, old, *groups, new, mask, node)
        if _traced(old) or _traced(v):
            if groups is None:
                raise self._escape(old)
            from migrator.cuda.interp.traced import TraceEscape

            raise TraceEscape(f"traced {v.ctype} stored through a view of {old.ctype}")
        parts = self._parts(m, old).copy()
        i = self._index(m, parts.shape[1], mask, node)
        lanes_ = np.flatnonzero(mask)
        parts[lanes_, i[lanes_]] = to_bytes(v, m.geo.n)[lanes_]
        whole = from_bytes(parts.reshape(m.geo.n, -1), self.inner.ctype)
        self.inner.store(m, whole, mask, node)


@dataclass
class MemLV:
    ptr: Val  # pointer value (buffer + element offsets)
    ctype: CType

    def load(self, m: Machine, mask: np.ndarray, node: object) -> Val:
        if self.ctype.kind == "array":  # a sub-array: its address, not a load
            return Val(self.ctype, self.ptr.data, buf=self.ptr.buf)
        return memory.load(m, self.ptr, self.ctype, mask, node)

    def store(self, m: Machine, v: Val, mask: np.ndarray, node: object) -> None:
        memory.store(m, self.ptr, v, mask, node)


@dataclass
class LaneElemLV(MemLV):
    """`r[k]` of a local array at an index every lane shares (a register tile's element):
    `MemLV` (its pointer is there for `&r[k]`), loaded and stored at one offset of every
    lane's row without resolving the pointer (`memory.lane_element_access`)."""

    def _access(self, m: Machine, mask: np.ndarray, node: object) -> memory.Access | None:
        buf = self.ptr.buf
        assert buf is not None
        return memory.lane_element_access(m, buf, int(self.ptr.data), self.ctype, mask, node)

    def load(self, m: Machine, mask: np.ndarray, node: object) -> Val:
        acc = self._access(m, mask, node)
        if acc is None:
            return memory.load(m, self.ptr, self.ctype, mask, node)
        return memory.load_lane_element(m, acc)

    def store(self, m: Machine, v: Val, mask: np.ndarray, node: object) -> None:
        acc = self._access(m, mask, node)
        if acc is None:
            memory.store(m, self.ptr, v, mask, node)
        else:
            memory.store_lane_element(m, acc, v)


@dataclass
class CompLV:
    """Component `k` (.x/.y/.z/.w) of a vector lvalue."""

    base: LValue
    k: int
    ctype: CType

    def load(self, m: Machine, mask: np.ndarray, node: object) -> Val:
        v = self.base.load(m, mask, node)
        assert v.comps is not None
        return v.comps[self.k]

    def peek(self, m: Machine, mask: np.ndarray, node: object) -> Val:
        v = _peek(self.base, m, mask, node)
        assert v.comps is not None
        return v.comps[self.k]

    def store(self, m: Machine, v: Val, mask: np.ndarray, node: object) -> None:
        if isinstance(self.base, MemLV):
            p = self.base.ptr
            memory.store(m, Val(p.ctype, p.data + self.k, buf=p.buf), v, mask, node)
            return
        old = _peek(self.base, m, mask, node)
        assert old.comps is not None
        comps = list(old.comps)
        comps[self.k] = v
        self.base.store(m, Val(old.ctype, comps=tuple(comps)), mask, node)


def _traced(v: Val) -> bool:
    if v.comps is not None:
        return any(_traced(c) for c in v.comps)
    return np.asarray(v.data).dtype == object


def _scalars(v: Val) -> list[Val] | None:
    """A vector's components (a scalar: itself); None for structs."""
    if v.ctype.kind == "struct":
        return None
    if v.comps is not None:
        out: list[Val] = []
        for c in v.comps:
            got = _scalars(c)
            if got is None:
                return None
            out += got
        return out
    return [v]


def _scalars_of(t: CType) -> list[CType] | None:
    if t.kind == "vec" and t.elem is not None:
        return [t.elem] * t.count
    if t.kind in ("float", "int"):
        return [t]
    return None


def _peek(lv: LValue, m: Machine, mask: np.ndarray, node: object) -> Val:
    peek = getattr(lv, "peek", None)
    return peek(m, mask, node) if peek is not None else lv.load(m, mask, node)


@dataclass
class TypeName:
    """A name bound to a type (template `typename T`, typedef)."""

    ctype: CType


@dataclass
class FuncAlias:
    """A template parameter bound to a function (`template <reduce_fn_t op>` used as
    `blockReduce<warpReduceSum>(v)`): a call of the parameter calls that function."""

    target: str


@dataclass
class Unavailable:
    """A file-scope name whose declaration the interpreter could not evaluate.

    Host code, headers and helpers a kernel never touches must not stop it: the error is kept
    and raised only where the launched kernel uses the name."""

    name: str
    error: InterpError


Binding = Var | TypeName | VarLV | MemLV | CompLV | Unavailable | FuncAlias


@dataclass
class Loop:
    """Lanes that left a loop (`brk`) or skip to its next iteration (`cont`). A `switch` is a
    Loop too (its `break`), but `continue` inside it belongs to the enclosing real loop."""

    brk: np.ndarray
    cont: np.ndarray
    is_switch: bool = False
    used: bool = False  # some lane broke or continued (else the masks are all False)


@dataclass
class Frame:
    """One function activation: its scopes, its return state and its loops."""

    ret_type: CType
    scopes: list[dict[str, Binding]]
    ret: np.ndarray  # lanes that executed `return`
    retval: Val | None = None
    loops: list[Loop] = field(default_factory=list)
    returned: bool = False  # some lane returned (else `ret` is all False)

    def lookup(self, name: str) -> Binding | None:
        for s in reversed(self.scopes):
            b = s.get(name)
            if b is not None:
                return b
        return None

    def live(self, mask: np.ndarray) -> np.ndarray:
        """Lanes of `mask` still running here (not returned, not broken or continued)."""
        m = mask & ~self.ret if self.returned else mask  # flags skip all-False masks
        for lp in reversed(self.loops):  # up to and including the innermost real loop
            if lp.used:
                m = m & ~(lp.brk | lp.cont)
            if not lp.is_switch:
                break
        return m

    def running(self, mask: np.ndarray, loop: Loop) -> np.ndarray:
        """Lanes of `mask` still in `loop` (not broken out of it, not returned)."""
        m = mask & ~loop.brk if loop.used else mask
        return m & ~self.ret if self.returned else m
