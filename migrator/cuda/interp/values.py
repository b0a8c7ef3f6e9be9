"""Runtime values: one numpy array over lanes (or a uniform numpy scalar) plus its C type.

A value that is the same for every lane (a literal, `blockDim.x`, a loop counter that only
uniform code touched) stays a numpy scalar; numpy broadcasting then does the right thing and a
uniform loop costs O(1) per step instead of O(lanes). Pointers are (buffer, element offset):
`data` holds the offset in units of the buffer's element type, so `reinterpret_cast<float4*>` of
a `float*` keeps the offset and only changes the pointee type.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from migrator.cuda.interp.ctypes_ import BOOL, CType
from migrator.cuda.interp.traced import OBJECT, traced

if TYPE_CHECKING:
    from migrator.cuda.interp.memory import Buffer


@dataclass
class Val:
    """A typed value over lanes. `comps` holds the components of a vector (float4 ...)."""

    ctype: CType
    data: Any = None  # np.ndarray [lanes] or numpy scalar
    buf: Buffer | None = None  # pointers and arrays only
    comps: tuple[Val, ...] | None = None  # vectors only

    @property
    def is_uniform(self) -> bool:
        return np.ndim(self.data) == 0


def scalar(ctype: CType, value: Any) -> Val:
    """A uniform value of a scalar type (wrap-around applied for integers)."""
    assert ctype.dtype is not None
    if ctype.kind == "int":
        bits = 8 * ctype.dtype.itemsize
        v = int(value) & ((1 << bits) - 1)  # wrap-around, then two's complement if signed
        if ctype.dtype.kind == "i" and v >> (bits - 1):
            v -= 1 << bits
        return Val(ctype, ctype.dtype.type(v))
    return Val(ctype, ctype.dtype.type(value))


def convert(v: Val, to: CType) -> Val:
    """C conversion of a value to type `to` (assignment, cast, argument passing).

    numpy differences handled here: float -> int truncates toward zero in both, but numpy
    wraps out-of-range values where CUDA's cvt.rzi saturates, so we clip first; int -> bool is
    `!= 0`, not a truncation; narrowing int -> int wraps (astype does the same).
    """
    src = v.ctype
    if src == to:
        return v
    if (
        src.kind == "float"
        and to.kind == "float"
        and (src.dtype == OBJECT or getattr(v.data, "dtype", None) == OBJECT)
    ):
        # a traced value stays traced in every float type (also one a select blended with a
        # constant of the branch's own type: `c ? __ushort_as_bfloat16(0) : val`)
        return Val(traced(to), v.data)
    if to.kind == "struct" or src.kind == "struct":
        raise TypeError(f"cannot convert {src} to {to}")
    if to.kind == "vec":
        if src.kind != "vec" or src.count != to.count or v.comps is None:
            raise TypeError(f"cannot convert {src} to {to}")
        assert to.elem is not None
        return Val(to, comps=tuple(convert(c, to.elem) for c in v.comps))
    if to.kind in ("ptr", "array"):
        if src.kind == "int":  # `reinterpret_cast<T*>(addr & ~3)`: back from an address
            return pointer_at(v, to)
        if src.kind not in ("ptr", "array"):
            raise TypeError(f"cannot convert {src} to pointer type {to}")
        return Val(to, v.data, buf=v.buf)
    if src.kind in ("ptr", "array"):
        if to.kind == "bool":  # `bool has_bias = bias;`: non-null
            return Val(BOOL, np.bool_(v.buf is not None))
        if to.kind == "int" and to.size == 8:  # `(uintptr_t)p`, `(size_t)p % 16`: an address
            return Val(to, address_of(v).astype(to.dtype))
        raise TypeError(f"cannot convert pointer {src} to {to}")
    if src.kind == "vec":
        raise TypeError(f"cannot convert {src} to {to}")
    if to.kind == "void":
        return Val(to, np.int8(0))
    assert to.dtype is not None
    data = v.data
    if to.kind == "bool":
        return Val(BOOL, np.asarray(data != 0) if np.ndim(data) else np.bool_(data != 0))
    if to.kind == "int" and src.kind == "float":
        # CUDA float->int conversion saturates (cvt.rzi.sat semantics); numpy would wrap
        info = np.iinfo(to.dtype)
        wide = np.asarray(data, dtype=np.float64)
        clipped = np.clip(np.trunc(np.nan_to_num(wide, nan=0.0)), info.min, info.max)
        out = clipped.astype(to.dtype)
        return Val(to, out if np.ndim(data) else out[()])
    if (
        to.kind == "float"
        and src.kind == "float"
        and src.dtype != np.float64
        and to.dtype
        not in (
            np.float32,
            np.float64,
        )
    ):
        # half/bf16 <- float: one rounding step (RTNE) from float32, as __float2half_rn
        out = np.asarray(data, dtype=np.float32).astype(to.dtype)
        return Val(to, out if np.ndim(data) else out[()])
    out = np.asarray(data).astype(to.dtype)
    return Val(to, out if np.ndim(data) else out[()])


def select(mask: Any, a: Val, b: Val) -> Val:
    """Lane-wise `mask ? a : b` for values of the same type (vectors component-wise)."""
    if a.comps is not None and b.comps is not None:
        return Val(
            a.ctype, comps=tuple(select(mask, x, y) for x, y in zip(a.comps, b.comps, strict=True))
        )
    if a.buf is not b.buf and (a.buf is not None or b.buf is not None):
        raise TypeError("pointers into different buffers selected per lane")
    return Val(a.ctype, blend(mask, a.data, b.data), buf=a.buf)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def blend(mask: Any, a: Any, b: Any) -> Any:
    """`np.where(mask, a, b)`, branch-free for two lane arrays of one dtype.

    np.where mispredicts a branch per lane on data-dependent masks (`x > 0 ? x : 0` over random
    x: ~5x slower than on runs of lanes); selecting bits with a mask of all-ones/all-zeros words,
    `b ^ ((a ^ b) & m)`, costs the same whatever the mask and keeps every bit (NaN payloads,
    -0.0) exactly. A uniform operand of the same dtype is broadcast."""
    if isinstance(mask, np.ndarray) and mask.ndim == 1:
        if isinstance(a, np.generic) or (isinstance(a, np.ndarray) and a.ndim == 0):
            a = np.broadcast_to(a, mask.shape)
        if isinstance(b, np.generic) or (isinstance(b, np.ndarray) and b.ndim == 0):
            b = np.broadcast_to(b, mask.shape)
    if (
        isinstance(a, np.ndarray)
        and isinstance(b, np.ndarray)
        and isinstance(mask, np.ndarray)
        and a.dtype == b.dtype
        and a.ndim == 1
        and a.shape == b.shape == mask.shape
        and mask.dtype == np.bool_
        and a.dtype.itemsize in _UINT
        and a.dtype.kind in "fiub"
    ):
        word = _UINT[a.dtype.itemsize]
        bits = mask.view(np.uint8).astype(word)
        np.negative(bits, out=bits)  # 1 -> all ones, 0 -> 0
        ua, ub = a.view(word), b.view(word)
        out = np.bitwise_xor(ua, ub)
        np.bitwise_and(out, bits, out=out)
        np.bitwise_xor(out, ub, out=out)
        return out.view(a.dtype)
    return np.where(mask, a, b)


def lanes(v: Val, n: int) -> np.ndarray:
    """The value's data as a full array over `n` lanes (broadcasting a uniform scalar)."""
    d = v.data
    if type(d) is np.ndarray and d.ndim:
        return d
    d = np.asarray(d)
    if d.ndim or d.dtype == OBJECT:
        return d if d.ndim else np.broadcast_to(d, (n,))
    return repeated(d, n)


def repeated(d: np.ndarray, n: int) -> np.ndarray:
    """A 0-d numeric array as `n` lanes: a read-only zero-stride view, as `broadcast_to` makes,
    at a tenth of its cost (a uniform index is broadcast at every access of a few-lane loop)."""
    out = np.ndarray((n,), d.dtype, d, 0, (0,))
    out.flags.writeable = False
    return out


def to_bytes(v: Val, n: int) -> np.ndarray:
    """The value's bytes per lane, `[n, sizeof]` uint8 (vectors: components in order)."""
    if v.comps is not None and v.ctype.kind == "struct":  # fields at their offsets; padding 0
        out = np.zeros((n, v.ctype.size), dtype=np.uint8)
        for c, off in zip(v.comps, v.ctype.field_offsets, strict=True):
            out[:, off : off + c.ctype.size] = to_bytes(c, n)
        return out
    if v.comps is not None:
        return np.concatenate([to_bytes(c, n) for c in v.comps], axis=1)
    assert v.ctype.dtype is not None
    a = np.ascontiguousarray(np.broadcast_to(np.asarray(v.data, dtype=v.ctype.dtype), (n,)))
    return a.view(np.uint8).reshape(n, v.ctype.dtype.itemsize)


def from_bytes(b: np.ndarray, t: CType) -> Val:
    """A value of type `t` from `[n, sizeof(t)]` bytes (the inverse of `to_bytes`)."""
    if t.kind == "vec":
        assert t.elem is not None
        w = t.elem.size
        return Val(t, comps=tuple(from_bytes(b[:, k * w : (k + 1) * w], t.elem)
                                  for k in range(t.count)))  # fmt: skip
    if t.kind == "struct":
        fields = zip(t.fields, t.field_offsets, strict=True)
        comps = tuple(from_bytes(b[:, off : off + f.size], f) for (_, f), off in fields)
        return Val(t, comps=comps)
    if t.kind not in ("int", "float", "bool") or t.dtype is None:
        raise TypeError(f"bytes as {t}")
    return Val(t, np.ascontiguousarray(b).view(t.dtype).reshape(len(b)))


# Addresses. Each buffer gets a base address the first time a pointer into it becomes an integer:
# 2^40-byte apart and 256-byte aligned (cudaMalloc's alignment), so alignment arithmetic
# (`p & ~3`, `(size_t)p % 16`) means what it means on the device, and an address turned back into
# a pointer finds its buffer. A null pointer is address 0.
_ADDRESS_SHIFT = 40
_BUFFERS: weakref.WeakValueDictionary[int, Buffer] = weakref.WeakValueDictionary()
_NEXT_KEY = itertools.count(1)


def address_of(p: Val) -> np.ndarray:
    """Byte addresses of a pointer value (int64 per lane, or a numpy scalar)."""
    buf = p.buf
    offsets = np.asarray(p.data, dtype=np.int64)
    if buf is None:
        return offsets * 0
    base = buf.base or buf
    if not base.address_key:
        base.address_key = next(_NEXT_KEY)
        _BUFFERS[base.address_key] = base
    return (np.int64(base.address_key) << np.int64(_ADDRESS_SHIFT)) + offsets * np.int64(
        buf.elem.size
    )


def pointer_at(v: Val, to: CType) -> Val:
    """The pointer of type `to` at integer address(es) `v` (from `address_of`)."""
    a = np.asarray(v.data).astype(np.int64)
    keys = (a >> _ADDRESS_SHIFT).reshape(-1)
    key = int(keys[0]) if keys.size and (keys == keys[0]).all() else None  # one buffer's
    if key == 0 and not a.any():
        return Val(to, np.int64(0), buf=None)  # the null pointer
    buf = _BUFFERS.get(key) if key is not None else None
    if buf is None:
        raise TypeError("an integer that is not an address in one buffer is used as a pointer")
    byte = a - (np.int64(key) << np.int64(_ADDRESS_SHIFT))
    if np.any(byte % buf.elem.size):
        raise TypeError(f"an address inside a {buf.elem} element of {buf.name!r} used as {to}")
    off = byte // buf.elem.size
    return Val(to, off if off.ndim else off[()], buf=buf)
