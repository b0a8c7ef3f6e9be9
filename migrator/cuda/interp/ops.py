"""C operators on lane values: one table row per operator, numpy differences noted per row.

Operands first go through the usual arithmetic conversions (`ctypes_.arith_result`), so numpy
always sees two arrays of one dtype and its own (value-based or NEP 50) promotion never decides
a C type. Integer overflow wraps (numpy wraps fixed-width ints; the run silences its warnings).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from migrator.cuda.interp.ctypes_ import BOOL, FLOAT, INT, CType, arith_result, promote
from migrator.cuda.interp.traced import DIVIDE, OBJECT, per_distinct
from migrator.cuda.interp.values import Val, convert

Arr = Any


def _div(a: Arr, b: Arr, t: CType) -> Arr:
    if t.kind == "float":
        if t.dtype == OBJECT:
            return DIVIDE(a, b)  # traced values (traced.py)
        return np.true_divide(a, b)  # IEEE division, like CUDA's default -prec-div=true
    # numpy `//` floors; C truncates toward zero: subtract the C remainder first (as triton)
    return np.floor_divide(a - np.fmod(a, b), b)


def _mod(a: Arr, b: Arr, t: CType) -> Arr:
    if t.kind == "float":
        raise TypeError("'%' on floating operands (use fmodf)")
    return np.fmod(a, b)  # C `%` takes the dividend's sign: numpy.fmod, not numpy.remainder


def _plain(fn: Callable[[Arr, Arr], Arr]) -> Callable[[Arr, Arr, CType], Arr]:
    return lambda a, b, t: fn(a, b)


def _int_only(fn: Callable[[Arr, Arr], Arr], sym: str) -> Callable[[Arr, Arr, CType], Arr]:
    def op(a: Arr, b: Arr, t: CType) -> Arr:
        if t.kind == "float":
            raise TypeError(f"'{sym}' on floating operands")
        return fn(a, b)

    return op


ARITH: dict[str, Callable[[Arr, Arr, CType], Arr]] = {
    "+": _plain(np.add),
    "-": _plain(np.subtract),
    "*": _plain(np.multiply),
    "/": _div,
    "%": _mod,
    "&": _int_only(np.bitwise_and, "&"),
    "|": _int_only(np.bitwise_or, "|"),
    "^": _int_only(np.bitwise_xor, "^"),
}

COMPARE: dict[str, Callable[[Arr, Arr], Arr]] = {
    "<": np.less,  # after the usual conversions, so -1 < 1u is false, as in C
    ">": np.greater,
    "<=": np.less_equal,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}

# Shifts: the result has the promoted LEFT type (not the usual conversions). `>>` of a signed
# value is arithmetic in numpy and in nvcc; of an unsigned value logical. numpy returns 0 (or
# the sign fill) for counts >= the width, which matches PTX shl/shr clamping.
SHIFT: dict[str, Callable[[Arr, Arr], Arr]] = {
    "<<": np.left_shift,
    ">>": np.right_shift,
}


# `i < n`, `bk * BK + k` of two uniform ints, in Python ints (a loop's test and its uniform
# index arithmetic at every step): what numpy's int32 scalars give, the sums wrapped alike
_UNIFORM_INT: dict[str, Callable[[int, int], Any]] = {
    "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne, "+": operator.add, "-": operator.sub,
    "*": operator.mul,
}  # fmt: skip
_I32 = 1 << 31


def binary(op: str, a: Val, b: Val, float_type: CType = FLOAT) -> Val:
    """Apply a C binary operator (not && / ||, which short-circuit per lane in `exprs`)."""
    ta, tb = a.ctype, b.ctype
    if ta is INT and tb is INT and type(a.data) is np.int32 and type(b.data) is np.int32:
        fn = _UNIFORM_INT.get(op)
        if fn is not None:
            v = fn(int(a.data), int(b.data))
            if v is True or v is False:
                return Val(BOOL, np.bool_(v))
            return Val(INT, np.int32((v + _I32) % (2 * _I32) - _I32))
    if op in SHIFT:
        t = promote(ta)
        if t.kind != "int" or promote(tb).kind != "int":
            raise TypeError(f"shift of {ta} by {tb}")
        count = convert(b, t).data
        return Val(t, SHIFT[op](convert(a, t).data, count))
    t = arith_result(ta, tb, float_type)
    x = a.data if ta is t else convert(a, t).data
    y = b.data if tb is t else convert(b, t).data
    if op in COMPARE:
        return Val(BOOL, COMPARE[op](x, y))
    fn = ARITH.get(op)
    if fn is None:
        raise TypeError(f"unknown operator {op!r}")
    if t.dtype == OBJECT and op != "/":  # traced: a node per distinct pair (DIVIDE does too)
        return Val(t, per_distinct(lambda a, b: fn(a, b, t), x, y, commutative=op in ("+", "*")))
    return Val(t, fn(x, y, t))


def _neg(v: Val) -> Val:
    t = promote(v.ctype)
    return Val(t, np.negative(convert(v, t).data))  # unsigned negation wraps mod 2^n in both


def _pos(v: Val) -> Val:
    return convert(v, promote(v.ctype))


def _not(v: Val) -> Val:
    return Val(BOOL, np.equal(v.data, 0))


def _invert(v: Val) -> Val:
    t = promote(v.ctype)
    if t.kind != "int":
        raise TypeError(f"'~' on {v.ctype}")
    return Val(t, np.invert(convert(v, t).data))


UNARY: dict[str, Callable[[Val], Val]] = {"-": _neg, "+": _pos, "!": _not, "~": _invert}


def truthy(v: Val) -> Arr:
    """C truth value of a scalar or pointer (non-zero)."""
    if v.ctype.kind == "bool":
        return v.data
    if v.ctype.is_pointer_like:  # data is an element offset: a pointer is null iff no buffer
        return np.bool_(v.buf is not None)
    return np.not_equal(v.data, 0)


def mask_and(mask: np.ndarray, cond: Any) -> np.ndarray:
    """`mask & cond` for a lane mask and a condition that may be one uniform truth value.

    numpy 2.4 runs `bool_array & scalar` (and `|`) ~30x slower than `&` of two arrays (no SIMD
    loop for the broadcast scalar), and uniform conditions (`stride > 0`) are common."""
    if np.ndim(cond) == 0:
        return mask.copy() if cond else np.zeros_like(mask)
    return mask & np.asarray(cond, dtype=bool)


__all__ = ["ARITH", "COMPARE", "SHIFT", "UNARY", "binary", "mask_and", "truthy", "INT"]
