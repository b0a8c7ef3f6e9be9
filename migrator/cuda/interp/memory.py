"""Buffers and checked loads/stores for global, shared, local and constant memory.

A buffer is one flat numpy array. Shared memory has one row per block of the batch and local
arrays one row per lane, so an access computes `row * size + offset` with `row` the lane's block
(shared) or the lane itself (local). Every access is bounds-checked against the row size, and
shared reads are checked for initialisation and races. New shared/local memory is poisoned (NaN,
`iinfo.max`, True) so reading it before writing shows up in outputs even when not reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.findings import OutOfBoundsError
from migrator.cuda.interp.races import RaceTracker
from migrator.cuda.interp.span import Span, put, span_of, take
from migrator.cuda.interp.traced import OBJECT, Packed, Sym, TraceEscape, unpack
from migrator.cuda.interp.values import Val, lanes, repeated

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine

Space = Literal["global", "shared", "local", "constant"]


def poison(dtype: np.dtype, mode: str) -> object:
    """The fill value of fresh memory: NaN / iinfo.max / True, or zero for uninit='zero'."""
    if mode == "zero":
        return dtype.type(0)
    if dtype == np.bool_:
        return True
    if np.issubdtype(dtype, np.integer):
        return np.iinfo(dtype).max
    return np.nan


@dataclass(eq=False)
class Buffer:
    name: str
    space: Space
    data: np.ndarray  # flat
    elem: CType  # scalar element type stored
    size: int  # elements per row
    per: Literal["grid", "block", "lane"] = "grid"
    init: np.ndarray | None = None  # shared only: which elements were written
    race: RaceTracker | None = None  # shared only
    all_init: bool = False  # every element written once: reads need no initialisation check
    # a view of another buffer's bytes as another element type (`reinterpret_cast<float4*>` of
    # a `__half*`): the buffer it views, and views of this buffer by element type
    base: Buffer | None = None
    views: dict[np.dtype, Buffer] | None = None
    # extent measurement (InterpOptions.extents): one past the highest byte any access reached
    track: bool = False
    hi_bytes: int = 0
    writer: np.ndarray | None = None  # InterpOptions.writers: the block that wrote each element
    overlap: np.ndarray | None = None  # ... and the elements several blocks stored into
    stored: np.ndarray | None = None  # InterpOptions.stores: the elements a store reached
    cross_read: bool = False  # ... and a block read an element another block wrote
    address_key: int = 0  # its address range once a pointer into it became an integer (values)

    def fully_initialised(self) -> bool:
        """Initialisation never reverts, so once every element is written the per-read check
        (a gather over the lanes) can be skipped for the rest of the batch."""
        if not self.all_init and self.init is not None:
            self.all_init = bool(self.init.all())
        return self.all_init

    @classmethod
    def fresh(
        cls,
        name: str,
        space: Space,
        elem: CType,
        size: int,
        rows: int,
        per: str,
        mode: str,
        track: bool = False,
        races: bool = True,
    ) -> Buffer:
        assert elem.dtype is not None
        n = size * rows
        data = np.full(n, poison(elem.dtype, mode), dtype=elem.dtype)
        init = np.zeros(n, dtype=bool) if track else None
        race = RaceTracker(n, size) if track and races else None  # no tables when races=False
        return cls(name, space, data, elem, size, per, init, race)  # type: ignore[arg-type]


def _width(ctype: CType) -> int:
    return ctype.count if ctype.kind == "vec" else 1


class Access(NamedTuple):
    """One statement's access to a buffer, as the checks and the data movement need it."""

    buf: Buffer
    idx: np.ndarray | None  # active lane indices (None: every lane)
    flat: np.ndarray  # flat element index of each active lane (a vector: its first component)
    span: Span | None  # run structure of `flat` (span.py); None: irregular, or a vector access
    ctype: CType
    node: object  # the statement's AST node, for findings
    pack: int = 1  # traced runs: buffer elements per accessed element (a float4 of 8 halves)
    packed: bool = False  # traced runs: values move as `Packed` groups (opaque bits)
    # a shared buffer's: the lowest and highest offset within a block's row (the race
    # tables' queued reads are kept apart by it), where the access found it cheaply
    within: tuple[int, int] | None = None

    def components(self) -> Iterator[np.ndarray]:
        """Flat indices of each component (one for scalars, `count` for vector types)."""
        for k in range(_width(self.ctype)):
            yield self.flat + k * self.pack if k else self.flat

    def component_bounds(self) -> Iterator[tuple[np.ndarray, tuple[int, int] | None]]:
        """`components`, each with its `within` bounds (None: unknown)."""
        for k, f in enumerate(self.components()):
            b = self.within
            yield f, None if b is None else (b[0] + k * self.pack, b[1] + k * self.pack)


_MAX = np.maximum.reduce  # (the ufuncs' own reductions: `a.max()`, `a.any()` go through wrappers)
_ANY = np.logical_or.reduce


def _resolve(
    m: Machine, ptr: Val, ctype: CType, mask: np.ndarray, node: object, write: bool
) -> Access:
    """The access's active lanes, flat element indices and their run structure; raises or
    reports out-of-bounds accesses and drops them from the active set in report mode."""
    buf = ptr.buf
    if buf is None:
        raise m.unsupported(node, "access through a pointer that names no buffer")
    idx = m.active_lanes(mask)
    d = ptr.data
    if (type(d) is not np.ndarray or not d.ndim) and ctype.kind != "vec":
        fast = _resolve_uniform(m, buf, int(d), ctype, idx)
        if fast is not None:
            return Access(buf, fast[0], fast[1], fast[2], ctype, node, within=(int(d), int(d)))
    off = lanes(ptr, m.geo.n)
    if idx is not None:
        off = off[idx]
    w = _width(ctype)
    off = np.asarray(off, dtype=np.int64)
    if buf.track and off.size:  # before any bounds check: how far the kernel reaches
        end = (int(_MAX(off)) * buf.elem.size) + w * ctype.scalar.size
        buf.hi_bytes = max(buf.hi_bytes, end)
    pack = 1
    if buf.elem.dtype == OBJECT and ctype.scalar.size != buf.elem.size:
        # traced values have no bytes: a wider type over them (`float4` over eight halves, the
        # 128-bit copy idiom) moves groups of elements (`Packed`); narrower views cannot be
        # followed
        if ctype.scalar.size % buf.elem.size or buf.per != "grid" and buf.base is not None:
            raise TraceEscape(f"traced {buf.elem} values of {buf.name!r} read as {ctype.scalar}")
        pack = ctype.scalar.size // buf.elem.size
        bad_align = (off % (pack * w)) != 0
        if bad_align.any():
            m.oob(node, buf, off, bad_align, idx, write, misaligned=True)
        return _resolve_packed(m, buf, off, idx, ctype, node, write, pack)
    if ctype.scalar.dtype == OBJECT and buf.elem.dtype != OBJECT:
        # traced values through a view of an untyped buffer (`extern __shared__ char p[]`
        # holding float4s): they have no bytes, so the buffer's bytes become slots of that
        # type (only once, and only while no plain value was put there)
        view = _traced_view(m, buf, ctype.scalar, node)
        buf, off = view, _offsets_in(m, buf, view, off, w, idx, write, node)
    elif buf.elem.dtype != OBJECT and OBJECT in ((buf.base or buf).views or {}):
        raise TraceEscape(f"the bytes of traced values in {buf.name!r} read as {ctype}")
    if buf.elem.dtype == OBJECT and ctype.scalar.dtype != OBJECT:
        # traced floats read through a vector of their own type (`float4` over floats): the
        # same values, no bytes to view; another type of the same width (`int4` over floats,
        # llm.c's Packed128) moves them as opaque one-element groups that only copies undo
        if ctype.scalar.name != buf.elem.name:
            if buf.per != "grid" and buf.base is not None:
                raise TraceEscape(f"traced {buf.elem} values of {buf.name!r} read as {ctype}")
            return _resolve_packed(m, buf, off, idx, ctype, node, write, 1)
    elif ctype.scalar.dtype != buf.elem.dtype:  # the same bytes read as another type
        view = view_of(m, buf, ctype.scalar, node)
        buf, off = view, _offsets_in(m, buf, view, off, w, idx, write, node)
    last = buf.size - w  # last valid start offset
    if w > 1:
        bad_align = (off % w) != 0
        if bad_align.any():
            m.oob(node, buf, off, bad_align, idx, write, misaligned=True)
    span = span_of(off) if w == 1 and buf.per == "grid" else None
    if span is not None:  # bounds of a run structure: its first and last element
        lo, hi = span.start, span.start + (span.rows - 1) * span.step + span.cols - 1
        outside = last < 0 or lo < 0 or hi > last
    else:  # one reduction, no temporary: a negative offset viewed as uint64 is huge
        outside = bool(off.size) and (last < 0 or int(_MAX(off.view(np.uint64))) > last)
    if outside:  # the mask only when needed
        # one unsigned compare catches both ends: a negative offset viewed as uint64 is huge
        bad = off.view(np.uint64) > np.uint64(last) if last >= 0 else np.ones(off.shape, bool)
        m.oob(node, buf, off, bad, idx, write)
        keep = ~bad
        idx = (np.flatnonzero(mask)[keep]) if idx is None else idx[keep]
        off = off[keep]
        span = None
    within = None
    if buf.per in ("block", "lane"):
        base = m.geo.row_base(buf.per, buf.size)
        flat = (base if idx is None else base[idx]) + off
        span = span_of(flat) if w == 1 else None
        if buf.race is not None and off.size:
            within = int(off.min()), int(off.max())
    else:
        flat = off
    return Access(buf, idx, flat, span, ctype, node, within=within)


def _resolve_uniform(
    m: Machine, buf: Buffer, off: int, ctype: CType, idx: np.ndarray | None
) -> tuple[np.ndarray | None, np.ndarray, Span | None] | None:
    """`_resolve` of one offset for every active lane (`r[k]` of a register tile, `x[row]`),
    in bounds, of a scalar of the buffer's own plain dtype: (idx, flat, span) as the general
    path gives them, without building and reducing a lane array of equal offsets. None for
    anything else (out of bounds, views, traced values, no active lane): the general path."""
    dt = buf.elem.dtype
    if (
        ctype.scalar.dtype != dt or dt == OBJECT or off < 0 or off >= buf.size
        or (idx is not None and not idx.size)
        or OBJECT in ((buf.base or buf).views or {})
    ):  # fmt: skip
        return None
    return _uniform_at(m, buf, off, ctype, idx)


def _uniform_at(
    m: Machine, buf: Buffer, off: int, ctype: CType, idx: np.ndarray | None
) -> tuple[np.ndarray | None, np.ndarray, Span | None]:
    """(idx, flat, span) of in-bounds element `off` for every active lane (`idx`, some)."""
    if buf.track:  # before any bounds check: how far the kernel reaches
        buf.hi_bytes = max(buf.hi_bytes, off * buf.elem.size + ctype.scalar.size)
    if buf.per in ("block", "lane"):
        base = m.geo.row_base(buf.per, buf.size)
        flat = (base if idx is None else base[idx]) + off
        # (lanes' rows of two or more elements: one element `size` apart per lane, runs of
        # one, which `span_of` never takes)
        return idx, flat, span_of(flat) if buf.per == "block" or buf.size == 1 else None
    count = m.geo.n if idx is None else idx.size
    # (one element seen by every lane: never written through)
    return idx, repeated(np.asarray(off, dtype=np.int64), count), None


def _resolve_packed(
    m: Machine,
    buf: Buffer,
    off: np.ndarray,
    idx: np.ndarray | None,
    ctype: CType,
    node: object,
    write: bool,
    pack: int,
) -> Access:
    """`_resolve` for a traced access whose element spans `pack` buffer elements."""
    last = buf.size - _width(ctype) * pack
    bad = (off < 0) | (off > last)
    if bad.any():
        m.oob(node, buf, off, bad, idx, write)
        keep = ~bad
        idx = (np.flatnonzero(np.ones(off.size, bool))[keep]) if idx is None else idx[keep]
        off = off[keep]
    if buf.per in ("block", "lane"):
        base = m.geo.row_base(buf.per, buf.size)
        flat = (base if idx is None else base[idx]) + off
    else:
        flat = off
    return Access(buf, idx, flat, None, ctype, node, pack, packed=True)


def _offsets_in(
    m: Machine,
    buf: Buffer,
    view: Buffer,
    off: np.ndarray,
    w: int,
    idx: np.ndarray | None,
    write: bool,
    node: object,
) -> np.ndarray:
    """Offsets into `buf` (its elements) as offsets into `view` (another element type over the
    same bytes); an access off the view's alignment is reported."""
    byte = off * buf.elem.size
    bad_align = (byte % (view.elem.size * w)) != 0
    if bad_align.any():
        m.oob(node, buf, off, bad_align, idx, write, misaligned=True)
    return byte // view.elem.size


def _traced_view(m: Machine, buf: Buffer, elem: CType, node: object) -> Buffer:
    """A byte buffer's slots for traced values of type `elem` (a shared `char` buffer that
    holds float4s): one object array beside the bytes, which nothing may read as bytes after
    (`_resolve`). Only a byte buffer no plain store has written: its bytes would be lost."""
    base = buf.base or buf
    hit = (base.views or {}).get(OBJECT)
    if hit is not None:
        if hit.elem.name != elem.name:
            raise TraceEscape(f"traced {hit.elem} and {elem} values in the buffer {base.name!r}")
        return hit
    row_bytes = base.size * base.elem.size
    if base.elem.size != 1 or row_bytes % elem.size or base.space == "global":
        raise TraceEscape(f"traced {elem} values stored in the {buf.elem} buffer {buf.name!r}")
    if base.views or (base.init is not None and base.init.any()):  # (a plain view, or stores)
        raise TraceEscape(f"traced {elem} values stored beside plain values in {buf.name!r}")
    data = np.full(base.data.nbytes // elem.size, np.nan, dtype=OBJECT)
    view = Buffer(base.name, base.space, data, elem, row_bytes // elem.size, base.per, base=base)
    if base.views is None:
        base.views = {}
    base.views[OBJECT] = view
    return view


def view_of(m: Machine, buf: Buffer, elem: CType, node: object) -> Buffer:
    """`buf`'s bytes as elements of type `elem` (a shared numpy view: stores write through).
    Rows (per block or lane) must hold whole elements of both types."""
    assert elem.dtype is not None
    base = buf.base or buf
    if elem.dtype == base.elem.dtype:
        return base
    if base.views is None:
        base.views = {}
    hit = base.views.get(elem.dtype)
    if hit is not None:
        return hit
    row_bytes = base.size * base.elem.size
    if row_bytes % elem.size or base.data.nbytes % elem.size:
        raise m.unsupported(
            node,
            f"{base.space} buffer {base.name!r} ({base.elem}) read as {elem}: "
            f"{row_bytes} bytes per row are not whole {elem} elements",
        )
    view = Buffer(base.name, base.space, base.data.view(elem.dtype), elem,
                  row_bytes // elem.size, base.per, base=base)  # fmt: skip
    base.views[elem.dtype] = view
    return view


def _tracked(acc: Access) -> list[Access]:
    """The accesses the initialisation and race checks see: for a view, each element of the
    viewed buffer the access touches (one per byte group); else the access itself."""
    view, base = acc.buf, acc.buf.base
    if base is None or (base.init is None and base.race is None):
        return [acc]
    out = []
    for f in acc.components():
        first = (f * view.elem.size) // base.elem.size
        for k in range(max(1, view.elem.size // base.elem.size)):
            out.append(Access(base, acc.idx, first + k if k else first, None, base.elem,
                              acc.node))  # fmt: skip
    return out


def field_pointers(m: Machine, ptr: Val, t: CType, node: object) -> list[tuple[Val, CType]]:
    """Each field of the struct `*ptr` in memory: a pointer to it and its type."""
    buf = ptr.buf
    if buf is None:
        raise m.unsupported(node, "access through a pointer that names no buffer")
    esize = buf.elem.size
    out = []
    for (name, f), off in zip(t.fields, t.field_offsets, strict=True):
        if f.kind == "array" or off % esize:
            raise m.unsupported(node, f"field {name} of struct {t} in {buf.space} memory "
                                f"({f} at byte {off} of a {buf.elem} buffer)")  # fmt: skip
        out.append((Val(ct.ptr(f), ptr.data + off // esize, buf=buf), f))
    return out


def load(m: Machine, ptr: Val, ctype: CType, mask: np.ndarray, node: object) -> Val:
    """Load `*ptr` of type `ctype` for the active lanes (inactive lanes hold poison)."""
    if ctype.kind == "struct":  # field by field (each checked like any other access)
        fields = field_pointers(m, ptr, ctype, node)
        return Val(ctype, comps=tuple(load(m, p, f, mask, node) for p, f in fields))
    acc = _resolve(m, ptr, ctype, mask, node, write=False)
    for a in _tracked(acc):
        buf = a.buf
        if buf.space == "shared":
            _check_shared_read(m, a)
        elif buf.init is not None and not buf.fully_initialised():  # a local array
            _check_init(m, a, "local array")
    if m.options.writers:
        for f in acc.components():
            note_reads(m, acc.buf, f, acc.idx)
    if ctype.kind == "vec":
        assert ctype.elem is not None
        elem = ctype.elem
        return Val(ctype, comps=tuple(_gather(m, acc, f, elem) for f in acc.components()))
    return _gather(m, acc, acc.flat, ctype, acc.span)


def _gather(m: Machine, acc: Access, flat: np.ndarray, ct: CType, span: Span | None = None) -> Val:
    """Values at `flat` for the access's active lanes (the others hold poison)."""
    data = acc.buf.data
    plain = _plain_through_view(acc, data, flat, ct) if acc.packed and acc.pack == 1 else None
    if plain is not None:
        values = plain
    elif acc.packed:  # traced: each value is a group of buffer elements
        parts = [data[flat + j] for j in range(acc.pack)]
        values = np.empty(flat.size, dtype=object)
        for i in range(flat.size):
            values[i] = Packed(tuple(p[i] for p in parts))
    elif acc.idx is None and flat.size and not flat.strides[0] and data.ndim == 1:
        # every lane reads one element (`w[k]`, `x[row]` in a loop): a uniform value, as a
        # literal is, so what it feeds stays one number instead of a lane array of copies
        return Val(ct, data[flat[0]])
    else:
        values = take(data, flat, span)
    if acc.idx is None:
        return Val(ct, values)
    out = np.full(m.geo.n, poison(data.dtype, m.options.uninit), dtype=data.dtype)
    out[acc.idx] = values
    return Val(ct, out)


def _plain_through_view(
    acc: Access, data: np.ndarray, flat: np.ndarray, ct: CType
) -> np.ndarray | None:
    """Numbers, not traced values, read from a traced buffer through another type of the same
    integer width: a counter kept in a float buffer (`*(unsigned*)(shared + 2 * C) =
    atomicAdd(...)`, then compared with `gridDim.x - 1`) reads as the number stored there.
    Traced buffers hold values, not bytes: the counter's atomics add by value. A whole number
    read as bits elsewhere would only make the fit fail: the program is verified against
    untraced runs. None where any is traced, or not a small whole number."""
    raw = data[flat]
    want = ct.dtype
    if want is None or want.kind not in "iu" or any(isinstance(x, (Sym, Packed)) for x in raw):
        return None
    try:
        vals = np.asarray(raw.tolist(), dtype=np.float64)
    except (TypeError, ValueError):
        return None
    # (only small whole numbers, as counters hold: a fill such as -5.96e29 read as int4 by a
    # 128-bit copy stays an opaque group, its bits restored when it is stored back)
    if not (np.all(vals == np.round(vals)) and np.all(np.abs(vals) < 2**31)):
        return None
    return vals.astype(want)


def lane_element_access(
    m: Machine, buf: Buffer, off: int, ctype: CType, mask: np.ndarray, node: object
) -> Access | None:
    """The access `_resolve` makes of element `off` of every active lane's row of a local
    array (`r[k]` of a register tile: one offset for every lane, in bounds, the buffer's own
    element type, no view), without a pointer to resolve (`exprs._lane_element` vouches for
    those); None where no lane is active (the general path then)."""
    idx = m.active_lanes(mask)
    if idx is not None and not idx.size:
        return None
    return Access(buf, *_uniform_at(m, buf, off, ctype, idx), ctype, node, within=(off, off))


# `load` and `store` of a `lane_element_access`, what they do for a local array's element
# without the steps that cannot apply to one (views, shared memory, vectors, packed traced
# groups): a register tile's multiply-add is most of a GEMM's run, and going through them
# gave back most of the short path's saving (0.59 -> 0.64 s a run)
def load_lane_element(m: Machine, acc: Access) -> Val:
    """`load` of a `lane_element_access`."""
    buf = acc.buf
    if buf.init is not None and not buf.fully_initialised():
        _check_init(m, acc, "local array")
    if m.options.writers:
        note_reads(m, buf, acc.flat, acc.idx)
    return _gather(m, acc, acc.flat, acc.ctype, acc.span)


def store_lane_element(m: Machine, acc: Access, value: Val) -> None:
    """`store` of a scalar through a `lane_element_access`."""
    buf, idx, flat, span = acc.buf, acc.idx, acc.flat, acc.span
    if buf.init is not None and not buf.all_init:
        put(buf.init, flat, span, True)
    d = lanes(value, m.geo.n)
    put(buf.data, flat, span, d if idx is None else d[idx])
    if m.options.writers:
        note_writers(m, buf, flat, idx, None)
    if m.options.stores:
        note_stored(buf, flat)


def store(m: Machine, ptr: Val, value: Val, mask: np.ndarray, node: object) -> None:
    """Store `value` (already converted to the pointee type) for the active lanes.

    Several lanes storing to one address in one statement: the highest lane wins (numpy's
    fancy assignment keeps the last); CUDA leaves the winner unspecified, and for shared memory
    the race checker reports it.
    """
    if value.ctype.kind == "struct":
        assert value.comps is not None
        for (p, _), part in zip(field_pointers(m, ptr, value.ctype, node), value.comps,
                                strict=True):  # fmt: skip
            store(m, p, part, mask, node)
        return
    acc = _resolve(m, ptr, value.ctype, mask, node, write=True)
    buf, idx, span = acc.buf, acc.idx, acc.span  # (a span only comes with width 1)
    if buf.space == "constant":
        raise m.error(node, f"store to __constant__ memory {buf.name!r}")
    for a in _tracked(acc):
        if a.buf.space == "shared":
            _check_shared_write(m, a)
        elif a.buf.init is not None and not a.buf.all_init:
            for f in a.components():
                put(a.buf.init, f, a.span, True)
    parts = value.comps if value.comps is not None else (value,)
    # (the values a store replaces, where an array argument's writers are recorded)
    plain = (m.options.writers and not acc.packed and buf.data.dtype != object
             and _root(buf).writer is not None)  # fmt: skip
    for f, part in zip(acc.components(), parts, strict=True):
        d = lanes(part, m.geo.n)
        d = d if idx is None else d[idx]
        was = take(buf.data, f, span) if plain else None
        if acc.packed:  # traced: unpack each group into its buffer elements
            for j in range(acc.pack):
                buf.data[f + j] = [unpack(v, j, acc.pack) for v in d]
        else:
            put(buf.data, f, span, d)
        if m.options.writers:
            # per lane: its store left the value as it was (bit 1), and it agrees with the
            # value kept where lanes of this statement stored into one element (bit 2)
            same = None
            if was is not None:
                same = (was == d).astype(np.int8) | ((take(buf.data, f, span) == d) << 1)
            for j in range(acc.pack):
                note_writers(m, buf, f + j, idx, same)
        if m.options.stores:
            for j in range(acc.pack):
                note_stored(buf, f + j)


def note_stored(buf: Buffer, flat: np.ndarray) -> None:
    """InterpOptions.stores: mark the elements of the array argument behind `buf` that a
    store (or atomic) at `flat` (its active lanes' elements) reached."""
    root = _root(buf)
    if root.stored is not None:
        for e, _, _ in _root_elements(buf, root, flat, root.stored.size):
            root.stored[e] = True


def _root(buf: Buffer) -> Buffer:
    """The array argument behind a view of it as another element type."""
    while buf.base is not None:
        buf = buf.base
    return buf


def _root_elements(
    buf: Buffer, root: Buffer, flat: np.ndarray, size: int, blk: np.ndarray | None = None,
    lane: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:  # fmt: skip
    """Per element of `root` an access of `buf` at `flat` spans (a view of another element
    type covers the elements its bytes do): those elements, below `size` only, each paired
    with the block of its lane (`blk`; the elements again without it) and with `lane`'s value
    for its lane (None without it)."""
    start = np.atleast_1d(np.asarray(flat, dtype=np.int64)) * buf.elem.size // root.elem.size
    out = []
    for k in range(max(1, buf.elem.size // root.elem.size)):
        e, b = np.broadcast_arrays(start + k, blk if blk is not None else start)
        ok = (e >= 0) & (e < size)
        v = None if lane is None else np.broadcast_to(lane, e.shape)[ok]
        out.append((e[ok], b[ok], v))
    return out


def _writer_map(
    m: Machine, buf: Buffer, flat: np.ndarray, idx: np.ndarray | None,
    lane: np.ndarray | None = None,
) -> tuple[Buffer, list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]] | None:  # fmt: skip
    """InterpOptions.writers: the array argument behind `buf` (a view of another element type
    covers the elements its bytes do) and, per element an access touches, (its element in that
    array, the block of the lane, `lane`'s value for it), in bounds only; None where no writers
    are recorded."""
    root = _root(buf)
    if root.writer is None:
        return None
    blk = m.geo.block_ids[m.geo.blk if idx is None else m.geo.blk[idx]]
    return root, _root_elements(buf, root, flat, root.writer.size, blk, lane)


def note_reads(m: Machine, buf: Buffer, flat: np.ndarray, idx: np.ndarray | None) -> None:
    """A lane loading an element another block stored (a last block summing the others'
    partials) marks the array: its blocks do not compute apart."""
    found = _writer_map(m, buf, flat, idx)
    if found is None or found[0].cross_read:
        return
    root, parts = found
    w = root.writer
    assert w is not None
    root.cross_read = any(bool(((w[e] != -1) & (w[e] != b)).any()) for e, b, _ in parts)


def note_writers(
    m: Machine, buf: Buffer, flat: np.ndarray, idx: np.ndarray | None,
    same: np.ndarray | None = None,
) -> None:  # fmt: skip
    """The block of each storing lane, per element; an element two blocks store different
    values into is -2. `same`, per lane (`store`'s two bits): its store left the element's
    value as it was, and it agrees with the value kept among this statement's lanes on the
    element. Where it stores what another block stored (a block redoing what another computed,
    as every block of llm.c's naive attention backward redoes every row), the element keeps a
    block whose store alone gives its value. None: any second block is -2 (an atomic's)."""
    found = _writer_map(m, buf, flat, idx, same)
    if found is None:
        return
    w, overlap = found[0].writer, found[0].overlap
    assert w is not None and overlap is not None
    for e, b, bits in found[1]:
        if bits is None:  # (no store repeats another)
            bits = np.zeros(e.shape, dtype=np.int8)
        cur = w[e]
        again = (cur == -1) | (cur == b)
        w[e] = np.where(again, b, np.where((bits & 1) == 1, cur, -2))
        # lanes of two blocks on one element in this statement: -2 where they stored
        # different values
        other = w[e] != b
        overlap[e[~again | other]] = True
        w[e[other & ((bits & 2) == 0)]] = -2


def _tids(m: Machine, idx: np.ndarray | None) -> np.ndarray:
    tid = m.geo.tid16  # the race tables' narrow dtype (races.TID)
    return tid if idx is None else tid[idx]


def _check_shared_read(m: Machine, acc: Access) -> None:
    buf = acc.buf
    if buf.init is not None and not buf.fully_initialised():
        _check_init(m, acc, "shared memory")
    tracker = buf.race if m.options.races else None
    if tracker is None:
        return
    for f, within in acc.component_bounds():
        race = tracker.read(f, _tids(m, acc.idx), acc.span, within)
        if race is not None and _ANY(race):
            m.finding(
                acc.node,
                "shared_race",
                f"read of shared {buf.name!r} at index {int((f % buf.size)[race][0])} races "
                "with a write by another thread since the last __syncthreads()",
                _lanes_mask(m, acc.idx, race),
            )


def _check_init(m: Machine, acc: Access, what: str) -> None:
    """Report lanes reading elements that no store has written (`buf.init`)."""
    buf = acc.buf
    assert buf.init is not None
    for f in acc.components():
        uninit = ~take(buf.init, f, acc.span)
        if _ANY(uninit):
            m.finding(
                acc.node,
                "uninitialized_read",
                f"read of uninitialised {what} {buf.name!r} at index "
                f"{int((f % buf.size)[uninit][0])}",
                _lanes_mask(m, acc.idx, uninit),
            )


def _check_shared_write(m: Machine, acc: Access) -> None:
    buf = acc.buf
    tracker = buf.race if m.options.races else None
    for f, within in acc.component_bounds():
        if buf.init is not None and not buf.all_init:
            put(buf.init, f, acc.span, True)
        if tracker is not None:
            race = tracker.write(f, _tids(m, acc.idx), acc.span, within)
            if _ANY(race):
                m.finding(
                    acc.node,
                    "shared_race",
                    f"write of shared {buf.name!r} at index {int((f % buf.size)[race][0])} "
                    "races with an access by another thread since the last __syncthreads()",
                    _lanes_mask(m, acc.idx, race),
                )


def _lanes_mask(m: Machine, idx: np.ndarray | None, sub: np.ndarray) -> np.ndarray:
    """A full-lane mask from a mask over the active subset."""
    if idx is None:
        return sub
    out = np.zeros(m.geo.n, dtype=bool)
    out[idx[sub]] = True
    return out


def oob_message(buf: Buffer, off: int, write: bool, misaligned: bool = False) -> str:
    what = "write" if write else "read"
    if misaligned:
        return f"misaligned {what} of {buf.space} buffer {buf.name!r} at element {off}"
    return f"out-of-bounds {what} of {buf.space} buffer {buf.name!r}: index {off}, size {buf.size}"


__all__ = ["Buffer", "OutOfBoundsError", "load", "store", "poison", "oob_message"]
