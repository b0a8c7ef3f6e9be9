"""Integer and bit-vector ``nl`` ops with exact integer semantics, plus ``nl.mod``.

Arithmetic ``nl`` ops go through fp32 (nki-facts §5), which loses bits above 2**24. The
bit-vector ALU ops instead work on the raw integer bits (nki-facts §4 "ALU operator table"),
so here integer operands are read as integers, combined in int64 and wrapped (two's complement)
into the result dtype. Where numpy differs from the hardware (house rule 5):

* ``right_shift`` is a *logical* shift of the operand's bit pattern: the ALU has no arithmetic
  right shift (nki-facts §4), while numpy's ``>>`` on signed ints is arithmetic.
* shift counts are taken modulo the operand's bit width (inferred: a hardware barrel shifter
  uses the low bits; numpy leaves counts ≥ width undefined).
* ``mod`` is the floor modulo with the sign of the divisor (the legacy ``nl.mod`` docstring
  compares it with Python's ``%``), unlike ``nl.fmod`` (sign of the dividend). Integer
  ``mod`` by zero gives 0 (numpy's choice; the hardware result is undocumented).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dtypes as _dt
from . import ops as _ops
from .errors import NkiConstraintError
from .run import record_tile
from .tensor import Buffer, Tensor
from .trace import Engine

IntFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


def _bits(x: np.ndarray, width: int) -> np.ndarray:
    """The unsigned ``width``-bit pattern of int64 values."""
    return x & ((1 << width) - 1)


def _rshift(x: np.ndarray, y: np.ndarray, width: int) -> np.ndarray:
    return _bits(x, width) >> (y % width)


def _mod(x: np.ndarray, y: np.ndarray, _: int) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y == 0, 0, np.mod(x, np.where(y == 0, 1, y)))


INT_BINARY: dict[str, IntFn] = {
    "bitwise_and": lambda x, y, _: x & y,
    "bitwise_or": lambda x, y, _: x | y,
    "bitwise_xor": lambda x, y, _: x ^ y,
    "left_shift": lambda x, y, w: _bits(x << (y % w), w),
    "right_shift": _rshift,
    "mod": _mod,
}
# Ops that only make sense on integers (mod also has a float form).
BITVEC = frozenset(INT_BINARY) - {"mod"}


def _is_int(x: Any) -> bool:
    if isinstance(x, Tensor):
        return x.dtype in _dt.INTS or x.dtype == _dt.bool_
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "iub"
    return isinstance(x, int | np.integer | bool)


def _raw(x: Any) -> tuple[np.ndarray, np.ndarray | None]:
    if isinstance(x, Tensor):
        data, valid = x.read()
        return data.astype(np.int64), valid
    return np.asarray(x, dtype=np.int64), None


def _result_dtype(a: Any, b: Any, dtype: Any) -> np.dtype:
    """Explicit dtype, else the tile dtype when the other side is a Python scalar, else promote."""
    from .language import _dtype_of

    if dtype is not None:
        return _dt.normalize(dtype)
    if not isinstance(b, Tensor):
        return a.dtype if isinstance(a, Tensor) else _dt.int32
    if not isinstance(a, Tensor):
        return b.dtype
    return _dt.promote(_dtype_of(a), _dtype_of(b))


def int_binary(op: str, a: Any, b: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """Exact integer ``op(a, b)``; float operands use fp32 math (mod) or are rejected (bitvec)."""
    from .language import _aligned, _combine, _f32_binary_op, _operands

    if not (_is_int(a) and _is_int(b)):
        if op in BITVEC:
            raise NkiConstraintError(
                "err_invalid_operand",
                f"nl.{op} works on the bits of integer tiles; got a floating-point operand "
                "(cast with dtype=nl.int32 first)",
            )
        return _f32_binary_op(op, a, b, dtype=dtype, mask=mask)
    _operands(op, [a, b])  # partition / buffer checks, shared with the fp32 ops
    out_dt = _result_dtype(a, b, dtype)
    width = 8 * _builtin_width(a, b, out_dt)
    (xa, oka), (xb, okb) = _raw(a), _raw(b)
    ndim = max(xa.ndim, xb.ndim)
    xa, xb = xa.reshape(_aligned(xa.shape, ndim)), xb.reshape(_aligned(xb.shape, ndim))
    values = INT_BINARY[op](xa, xb, width)
    valid = _combine([oka, okb], values.shape)
    return _emit(op, _wrap(values, out_dt), valid, out_dt, mask, 2)


def _builtin_width(a: Any, b: Any, out_dt: np.dtype) -> int:
    """Operand width in bytes for shifts: the left operand's dtype, else the result's."""
    if isinstance(a, Tensor) and a.dtype != _dt.bool_:
        return a.dtype.itemsize
    return out_dt.itemsize if out_dt in _dt.INTS else 4


def _wrap(values: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Two's-complement wrap of int64 results into an integer dtype (exact, no fp32 detour)."""
    if dt in _dt.INTS:
        return values.astype(dt)
    if dt == _dt.bool_:
        return values != 0
    return values.astype(np.float32)


def _emit(
    op: str, values: np.ndarray, valid: np.ndarray | None, dt: np.dtype, mask: Any, streams: int
) -> Tensor:
    """A new SBUF tile from exact values (no fp32 round trip), traced as a VectorE op."""
    from .language import _mask

    out = Tensor.from_values(values, valid, dt, Buffer.SBUF, _mask(mask, values.shape))
    record_tile(op, Engine.VECTOR, out, streams)
    return out


def invert(x: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """Bitwise NOT of an integer tile (``~x``); on bool tiles it is logical not."""
    from .language import _operands

    if not _is_int(x):
        raise NkiConstraintError(
            "err_invalid_operand", "nl.invert works on integer tiles; got a floating-point tile"
        )
    _operands("invert", [x])
    out_dt = _dt.normalize(dtype) if dtype is not None else x.dtype
    raw, valid = _raw(x)
    values = (raw == 0) if x.dtype == _dt.bool_ else ~raw
    return _emit("invert", _wrap(values, out_dt), valid, out_dt, mask, 1)


def _int_op(op: str) -> Any:
    def fn(x: Any, y: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
        return int_binary(op, x, y, dtype=dtype, mask=mask)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"nl.{op}: exact integer semantics (see migrator.nki.nl_int)."
    return _ops.op_name(op)(fn)


bitwise_and, bitwise_or, bitwise_xor = (
    _int_op("bitwise_and"),
    _int_op("bitwise_or"),
    _int_op("bitwise_xor"),
)
left_shift, right_shift, mod = _int_op("left_shift"), _int_op("right_shift"), _int_op("mod")
