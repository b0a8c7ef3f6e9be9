"""Half, bfloat16 and fp8 intrinsics (`cuda_fp16.h`, `cuda_bf16.h`, `cuda_fp8.h`).

fp8 values live in `__nv_fp8_storage_t` (unsigned char) and are converted explicitly:
`__nv_cvt_fp8_to_halfraw(x, __NV_E4M3)` is exact; `__nv_cvt_float_to_fp8(x, sat, interp)`
rounds to nearest even, `__NV_SATFINITE` clamping to the largest finite value (448 for E4M3,
57344 for E5M2) and `__NV_NOSAT` giving NaN (E4M3 has no infinity) or infinity (E5M2).

Each operation computes in float32 (or float64 for the fused multiply-add) and rounds once to
the operands' type. For +, -, * and / of two 11- or 8-bit-significand values, float32's 24
bits make that the correctly rounded half/bf16 result (double rounding is innocuous when the
wider format has at least 2p + 2 bits), which is what the hardware instructions return.
Paired forms apply the same operation to each component. The result type follows the operands
(`__hadd` on `__nv_bfloat16` is bf16).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.traced import OBJECT, elementwise, multiply_add, traced
from migrator.cuda.interp.values import Val, convert

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine

Builtin = Callable[["Machine", list[Val], np.ndarray, Node], Val]


def _low(v: Val) -> CType:
    """The half/bf16 type of a scalar or paired operand (HALF for anything else)."""
    t = v.ctype.elem if v.ctype.kind == "vec" and v.ctype.elem is not None else v.ctype
    return t if t in (ct.HALF, ct.BF16) else ct.HALF


def _f32(v: Val) -> Any:
    data = convert(v, ct.FLOAT).data
    if np.asarray(data).dtype == OBJECT:  # traced values stay traced (traced.py)
        return data
    return np.asarray(data, dtype=np.float32)


def _round(x: Any, t: CType) -> Val:
    if np.asarray(x).dtype == OBJECT:  # a traced run records no rounding
        return Val(traced(t), x)
    out = np.asarray(x, dtype=np.float32).astype(t.dtype)
    return Val(t, out if out.ndim else out[()])


def _pairwise(fn: Callable[[list[Val]], Val]) -> Callable[[list[Val]], Val]:
    """Apply a scalar operation to each component of paired operands."""

    def call(args: list[Val]) -> Val:
        if all(a.comps is None for a in args):
            return fn(args)
        n = next(len(a.comps) for a in args if a.comps is not None)
        parts = [fn([a.comps[i] if a.comps is not None else a for a in args]) for i in range(n)]
        return Val(ct.vec(parts[0].ctype, n), comps=tuple(parts))

    return call


def _arith(op: Callable[..., Any]) -> Builtin:
    def scalar(args: list[Val]) -> Val:
        t = _low(args[0])
        xs = [_f32(a) for a in args]
        if any(np.asarray(x).dtype == OBJECT for x in xs):  # traced: element by element
            return _round(elementwise(op, len(xs))(*xs), t)
        return _round(op(*xs), t)

    f = _pairwise(scalar)
    return lambda m, args, mask, node: f(args)


def _bits(to: ct.CType, src: ct.CType) -> Builtin:
    """`__ushort_as_bfloat16(u)` and friends: the same 16 bits as another type."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        assert to.dtype is not None
        return Val(to, np.asarray(convert(args[0], src).data).view(to.dtype))

    return call


def _fma(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    def scalar(a: list[Val]) -> Val:
        x, y, z = (np.asarray(convert(v, ct.DOUBLE).data) for v in a)
        if OBJECT in (x.dtype, y.dtype, z.dtype):  # traced: one node per element
            return _round(multiply_add(x, y, z, distinct=False), _low(a[0]))
        return _round((x * y + z).astype(np.float32), _low(a[0]))

    return _pairwise(scalar)(args)


def _compare(op: Callable[[Any, Any], Any]) -> Builtin:
    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        if any(a.comps is not None for a in args):
            raise m.unsupported(node, "paired comparison (returns a half2 of 0/1)")
        out = np.asarray(op(_f32(args[0]), _f32(args[1])))
        return Val(ct.BOOL, out if out.ndim else out[()])

    return call


def _pair(t: CType) -> Builtin:
    """`__floats2half2_rn(a, b)`, `__float2half2_rn(a)`, `__halves2half2(a, b)`."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        parts = args if len(args) == 2 else [args[0], args[0]]
        comps = tuple(_round(_f32(a), t) for a in parts)
        return Val(ct.vec(t, 2), comps=comps)

    return call


def _component(k: int, to_float: bool) -> Builtin:
    """`__low2half` / `__high2float` ...: one component of a pair."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        (v,) = args
        if v.comps is None or len(v.comps) != 2:
            raise m.error(node, "expected a half2/bfloat162 operand")
        c = v.comps[k]
        return convert(c, ct.FLOAT) if to_float else c

    return call


def _to_float2(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    (v,) = args
    if v.comps is None:
        raise m.error(node, "expected a half2/bfloat162 operand")
    return Val(ct.vec(ct.FLOAT, len(v.comps)), comps=tuple(convert(c, ct.FLOAT) for c in v.comps))


def _pair_of_float2(t: CType) -> Builtin:
    """`__float22half2_rn(float2)`: both components rounded (RTNE)."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        (v,) = args
        if v.comps is None or len(v.comps) != 2:
            raise m.error(node, "expected a float2 operand")
        return Val(ct.vec(t, 2), comps=tuple(_round(_f32(c), t) for c in v.comps))

    return call


def _from_number(t: CType) -> Builtin:
    """`__int2half_rn(i)`: an integer rounded to the nearest half (through double: exact)."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        x = np.asarray(convert(args[0], ct.DOUBLE).data).astype(t.dtype)
        return Val(t, x if x.ndim else x[()])

    return call


def _fp8_dtype(m: Machine, v: Val, node: Node) -> np.dtype:
    import ml_dtypes

    if not v.is_uniform or int(v.data) not in (0, 1):
        raise m.unsupported(node, "an fp8 interpretation other than __NV_E4M3 / __NV_E5M2")
    return np.dtype(ml_dtypes.float8_e4m3fn if int(v.data) == 0 else ml_dtypes.float8_e5m2)


def _fp8_to_half(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    bits = np.asarray(convert(args[0], ct.UCHAR).data, dtype=np.uint8)
    out = bits.view(_fp8_dtype(m, args[1], node)).astype(np.float16)  # exact
    return Val(ct.HALF, out if out.ndim else out[()])


def _float_to_fp8(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    dt = _fp8_dtype(m, args[2], node)
    if not args[1].is_uniform or int(args[1].data) not in (0, 1):
        raise m.unsupported(node, "an fp8 saturation other than __NV_NOSAT / __NV_SATFINITE")
    x = np.asarray(convert(args[0], ct.FLOAT).data, dtype=np.float32)
    import ml_dtypes

    big = float(ml_dtypes.finfo(dt).max)
    if int(args[1].data) == 1:  # __NV_SATFINITE
        x = np.clip(x, -big, big)
    elif dt.name == "float8_e4m3fn":  # no infinity: out of range is NaN
        x = np.where(np.abs(x) > big, np.float32(np.nan), x)
    out = x.astype(dt).view(np.uint8)
    return Val(ct.UCHAR, out if out.ndim else out[()])


def _rsqrt(x: Any) -> Any:
    return np.float32(1) / np.sqrt(x)


_ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.fmax, "min": np.fmin}  # fmt: skip
_UNARY = {"neg": np.negative, "abs": np.abs}
_MATH = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
         "rsqrt": _rsqrt, "rcp": lambda x: np.float32(1) / x, "sin": np.sin, "cos": np.cos,
         "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint}  # fmt: skip
_CMP = {"gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal,
        "eq": np.equal, "ne": np.not_equal}  # fmt: skip

HALF_BUILTINS: dict[str, Builtin] = {
    **{f"__h{k}": _arith(f) for k, f in _ARITH.items()},
    **{f"__h{k}2": _arith(f) for k, f in _ARITH.items()},
    **{f"__h{k}": _arith(f) for k, f in _UNARY.items()},
    **{f"__h{k}2": _arith(f) for k, f in _UNARY.items()},
    **{f"h{k}": _arith(f) for k, f in _MATH.items()},
    **{f"h2{k}": _arith(f) for k, f in _MATH.items()},
    **{f"__h{k}": _compare(f) for k, f in _CMP.items()},
    "__hfma": _fma,
    "__hfma2": _fma,
    "__float2half2_rn": _pair(ct.HALF),
    "__floats2half2_rn": _pair(ct.HALF),
    "__halves2half2": _pair(ct.HALF),
    "__half2half2": _pair(ct.HALF),
    "__float2bfloat162_rn": _pair(ct.BF16),
    "__floats2bfloat162_rn": _pair(ct.BF16),
    "__halves2bfloat162": _pair(ct.BF16),
    "__bfloat162bfloat162": _pair(ct.BF16),
    "__low2half": _component(0, False),
    "__high2half": _component(1, False),
    "__low2bfloat16": _component(0, False),
    "__high2bfloat16": _component(1, False),
    "__low2float": _component(0, True),
    "__high2float": _component(1, True),
    "__half22float2": _to_float2,
    "__nv_cvt_fp8_to_halfraw": _fp8_to_half,
    "__nv_cvt_float_to_fp8": _float_to_fp8,
    "__float22half2_rn": _pair_of_float2(ct.HALF),
    "__float22bfloat162_rn": _pair_of_float2(ct.BF16),
    "__int2half_rn": _from_number(ct.HALF),
    "__uint2half_rn": _from_number(ct.HALF),
    "__int2bfloat16_rn": _from_number(ct.BF16),
    "__bfloat1622float2": _to_float2,
    # bit casts between 16-bit floats and 16-bit integers
    **{f"__{i}_as_{h}": _bits(ct.HALF if h == "half" else ct.BF16, it)
       for h in ("half", "bfloat16") for i, it in (("short", ct.SHORT), ("ushort", ct.USHORT))},
    **{f"__{h}_as_{i}": _bits(it, ct.HALF if h == "half" else ct.BF16)
       for h in ("half", "bfloat16") for i, it in (("short", ct.SHORT), ("ushort", ct.USHORT))},
}  # fmt: skip
