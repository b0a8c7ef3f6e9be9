"""Math functions, conversion intrinsics and vector constructors: one table row each.

`...f` functions compute in float (numpy float32 kernels; CUDA's are within a few ulp of the
correctly rounded result, numpy's too, so they can differ in the last bits). Overloaded names
(`exp`, `max`, `abs`, ...) follow the argument type as C++'s <cmath> overloads do. `fmaxf`/
`fminf` ignore NaN like numpy's `fmax`/`fmin` (not `maximum`, which propagates NaN).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.traced import OBJECT, Sym, TraceEscape, elementwise, multiply_add
from migrator.cuda.interp.values import Val, convert

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine

Builtin = Callable[["Machine", list[Val], np.ndarray, Node], Val]


def erf(x: Any) -> Any:
    """Vectorised erf in float64 (numpy has none): Taylor series for |x| < 2.5, continued
    fraction for erfc beyond; accurate to ~1e-14, ample for float32 `erff`."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    small = np.minimum(ax, 2.5)
    term = small.copy()
    total = small.copy()
    x2 = small * small
    for n in range(1, 60):
        term = term * (-x2) / n
        total = total + term / (2 * n + 1)
    series = total * (2.0 / np.sqrt(np.pi))
    big = np.maximum(ax, 2.5)
    frac = np.zeros_like(big)
    for k in range(60, 0, -1):  # erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + ...)))
        frac = (k / 2.0) / (big + frac)
    cf = 1.0 - np.exp(-big * big) / np.sqrt(np.pi) / (big + frac)
    return np.sign(x) * np.where(ax < 2.5, series, cf)


def _traced_fn(fn: Callable[..., Any], t: CType, nargs: int) -> Callable[..., Any]:
    """For traced values (traced.py): the function applied element by element, so that a Sym
    operand builds a node (numpy calls its method of the same name) and a plain number (an
    inactive lane, a constant) is computed as a number."""
    if t.dtype != OBJECT:
        return fn
    if fn is erf:
        return _TRACED_ERF
    return elementwise(fn, nargs)


_TRACED_ERF = np.frompyfunc(lambda a: a.erf() if isinstance(a, Sym) else math.erf(a), 1, 1)


def _float_t(m: Machine, v: Val) -> CType:
    """Argument type of an overloaded math function: double stays double, the rest float."""
    return ct.DOUBLE if v.ctype == ct.DOUBLE else m.float_t


def _unary(fn: Callable[[Any], Any], fixed: str | None = None) -> Builtin:
    """`fixed`='f' forces float (expf), 'd' double (exp on an int is double), None: overload."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        (a,) = args
        if fixed == "f":
            t = m.float_t
        elif fixed == "d" and a.ctype.kind != "float":
            t = ct.DOUBLE
        else:
            t = _float_t(m, a)
        x = convert(a, t).data
        out = np.asarray(_traced_fn(fn, t, 1)(x)).astype(t.dtype)
        return Val(t, out if out.ndim else out[()])

    return call


def _binary(fn: Callable[[Any, Any], Any], fixed: str | None = None) -> Builtin:
    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        a, b = args
        if fixed == "f":
            t = m.float_t
        elif fixed == "d2":
            t = ct.DOUBLE
        else:
            t = ct.arith_result(a.ctype, b.ctype, m.float_t)
            if t.kind != "float":
                t = ct.DOUBLE
        f = _traced_fn(fn, t, 2)
        out = np.asarray(f(convert(a, t).data, convert(b, t).data)).astype(t.dtype)
        return Val(t, out if out.ndim else out[()])

    return call


def _minmax(float_fn: Callable[[Any, Any], Any], int_fn: Callable[[Any, Any], Any]) -> Builtin:
    """Generic max/min: integer overloads stay integer (usual conversions), floats NaN-ignore."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        a, b = args
        t = ct.arith_result(a.ctype, b.ctype, m.float_t)
        fn = _traced_fn(float_fn, t, 2) if t.kind == "float" else int_fn
        return Val(t, fn(convert(a, t).data, convert(b, t).data))

    return call


def _abs(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    (a,) = args
    t = ct.promote(a.ctype) if a.ctype.kind != "float" else a.ctype
    return Val(t, np.abs(convert(a, t).data))  # abs(INT_MIN) wraps to INT_MIN in both


def _fma(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """fmaf: exact product in float64 plus c, rounded to float (rare double-rounding ties)."""
    t = m.float_t
    if all(x.ctype is ct.FLOAT for x in args):  # (float32 operands: the ufuncs widen them)
        acc = np.multiply(args[0].data, args[1].data, dtype=np.float64)
        out = np.asarray(np.add(acc, args[2].data, dtype=np.float64)).astype(t.dtype)
        return Val(t, out if out.ndim else out[()])
    a, b, c = (convert(x, ct.DOUBLE).data for x in args)
    if any(np.asarray(v).dtype == OBJECT for v in (a, b, c)):  # traced: one node per element
        out = np.asarray(multiply_add(a, b, c, distinct=False)).astype(t.dtype)
    else:
        out = np.asarray(np.multiply(a, b) + c).astype(t.dtype)
    return Val(t, out if out.ndim else out[()])


def _fma_any(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """`fma(a, b, c)`: overloaded; float arguments give fmaf, anything else the double fma
    (numpy has no fused double fma: the product is rounded once before the add)."""
    if all(x.ctype.kind == "float" and x.ctype.dtype.itemsize <= 4 for x in args):
        return _fma(m, args, mask, node)
    if any(x.ctype == ct.DOUBLE for x in args):
        raise m.unsupported(node, "double-precision fma (no exact fused double in numpy)")
    a, b, c = (convert(x, ct.DOUBLE).data for x in args)
    out = np.asarray(np.multiply(a, b) + c)  # int arguments: exact in double
    return Val(ct.DOUBLE, out if out.ndim else out[()])


def _mul24(signed: bool) -> Builtin:
    """`__mul24` / `__umul24`: the low 32 bits of the product of the low 24 bits of each."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        t = ct.INT if signed else ct.UINT
        a, b = (np.asarray(convert(x, ct.UINT).data).astype(np.int64) & 0xFFFFFF for x in args)
        if signed:  # sign-extend bit 23
            a, b = ((x ^ 0x800000) - 0x800000 for x in (a, b))
        out = (np.asarray(a * b) & 0xFFFFFFFF).astype(np.uint32).astype(t.dtype)
        return Val(t, out if out.ndim else out[()])

    return call


def _brev(x: Any) -> Any:
    x = x.astype(np.uint32)
    out = np.zeros_like(x)
    for k in range(32):  # 32 whole-array steps, not a loop per element
        out |= ((x >> np.uint32(k)) & np.uint32(1)) << np.uint32(31 - k)
    return out


def _byte_perm(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """`__byte_perm(x, y, s)`: byte n of the result is byte (s >> 4n) & 7 of y:x."""
    x, y, sel = (np.asarray(convert(a, ct.UINT).data).astype(np.uint64) for a in args)
    both = (y << np.uint64(32)) | x
    out = np.zeros(np.broadcast_shapes(x.shape, y.shape, sel.shape), dtype=np.uint64)
    for n in range(4):
        pick = (sel >> np.uint64(4 * n)) & np.uint64(7)
        out |= ((both >> (pick * np.uint64(8))) & np.uint64(0xFF)) << np.uint64(8 * n)
    res = out.astype(np.uint32)
    return Val(ct.UINT, res if res.ndim else res[()])


def _float2int_dir(fn: Callable[[Any], Any], t: CType) -> Builtin:
    """`__float2int_rd` / `_ru` / `__float2uint_rn` ...: round in the named mode, then convert
    (saturating, as cvt.sat)."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        return convert(Val(ct.FLOAT, fn(convert(args[0], ct.FLOAT).data)), t)

    return call


def _rsqrt(x: Any) -> Any:
    return 1.0 / np.sqrt(x)


def _to(t: CType, via_float: bool = False) -> Builtin:
    """Conversion intrinsics (__float2half, __half2float, __float2int_rz, ...)."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        (a,) = args
        if via_float:
            a = convert(a, ct.FLOAT)
        return convert(a, t)

    return call


def _float2int_rn(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    (a,) = args
    return convert(Val(ct.FLOAT, np.rint(convert(a, ct.FLOAT).data)), ct.INT)  # rint is RTNE


def _make(name: str, n: int) -> Builtin:
    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        t = m.types[name]
        assert t.elem is not None
        if len(args) != n:
            raise m.error(node, f"make_{name} takes {n} arguments")
        return Val(t, comps=tuple(convert(a, t.elem) for a in args))

    return call


def _saturate(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    x = convert(args[0], m.float_t).data
    return Val(m.float_t, np.clip(np.nan_to_num(x, nan=0.0), 0.0, 1.0).astype(m.float_t.dtype))


def _int_fn(fn: Callable[[Any], Any], arg: CType = ct.UINT, result: CType = ct.INT) -> Builtin:
    """Bit intrinsics on 32-bit ints (result int, or unsigned for `__brev`)."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        x = np.asarray(convert(args[0], arg).data)
        out = np.asarray(fn(x)).astype(result.dtype)
        return Val(result, out if out.ndim else out[()])

    return call


def _popc(x: Any) -> Any:
    return np.bitwise_count(x.astype(np.uint32))


def _clz(x: Any) -> Any:
    x = x.astype(np.uint64)
    # bit length via float64 frexp is exact for 32-bit values; clz(0) = 32
    _, e = np.frexp(x.astype(np.float64))
    return np.where(x == 0, 32, 32 - e)


def _ffs(x: Any) -> Any:
    x = x.astype(np.int64) & 0xFFFFFFFF
    low = x & -x  # lowest set bit
    _, e = np.frexp(low.astype(np.float64))
    return np.where(x == 0, 0, e)


def _predicate(fn: Callable[[Any], Any]) -> Builtin:
    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        data = args[0].data
        if isinstance(data, Sym) or (isinstance(data, np.ndarray) and data.dtype == OBJECT):
            # (decided by the traced run's values, which are finite: the program would drop
            # the branch an infinity or a NaN takes, and no random input shows it)
            raise TraceEscape(f"{fn.__name__} of a traced value: a test for infinities or NaN "
                              "that a lifted program cannot carry")  # fmt: skip
        out = np.asarray(fn(data)).astype(np.int32)
        return Val(ct.INT, out if out.ndim else out[()])

    return call


MATH: dict[str, Builtin] = {
    # float versions (fast-math __ intrinsics evaluate as the accurate ones)
    "expf": _unary(np.exp, "f"),
    "__expf": _unary(np.exp, "f"),
    "exp2f": _unary(np.exp2, "f"),
    "logf": _unary(np.log, "f"),
    "__logf": _unary(np.log, "f"),
    "log2f": _unary(np.log2, "f"),
    "log10f": _unary(np.log10, "f"),
    "sqrtf": _unary(np.sqrt, "f"),
    "rsqrtf": _unary(_rsqrt, "f"),
    "tanhf": _unary(np.tanh, "f"),
    "erff": _unary(erf, "f"),
    "fabsf": _unary(np.abs, "f"),
    "floorf": _unary(np.floor, "f"),
    "ceilf": _unary(np.ceil, "f"),
    "truncf": _unary(np.trunc, "f"),
    "roundf": _unary(lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), "f"),  # half away from 0
    "rintf": _unary(np.rint, "f"),
    "sinf": _unary(np.sin, "f"),
    "__sinf": _unary(np.sin, "f"),
    "cosf": _unary(np.cos, "f"),
    "__cosf": _unary(np.cos, "f"),
    "tanf": _unary(np.tan, "f"),
    "fmaxf": _binary(np.fmax, "f"),
    "fminf": _binary(np.fmin, "f"),
    "powf": _binary(np.power, "f"),
    "__powf": _binary(np.power, "f"),
    "fmodf": _binary(np.fmod, "f"),
    "__fdividef": _binary(np.true_divide, "f"),
    "copysignf": _binary(np.copysign, "f"),
    "fdimf": _binary(lambda a, b: np.where(a > b, a - b, 0), "f"),
    "hypotf": _binary(np.hypot, "f"),
    "atan2f": _binary(np.arctan2, "f"),
    "expm1f": _unary(np.expm1, "f"),
    "log1pf": _unary(np.log1p, "f"),
    "cbrtf": _unary(np.cbrt, "f"),
    "atanf": _unary(np.arctan, "f"),
    "asinf": _unary(np.arcsin, "f"),
    "acosf": _unary(np.arccos, "f"),
    "sinhf": _unary(np.sinh, "f"),
    "coshf": _unary(np.cosh, "f"),
    "exp10f": _unary(lambda x: np.power(np.asarray(10.0, x.dtype), x), "f"),
    # explicitly rounded single operations are never contracted: plain IEEE ops
    "__fadd_rn": _binary(np.add, "f"),
    "__fsub_rn": _binary(np.subtract, "f"),
    "__fmul_rn": _binary(np.multiply, "f"),
    "__fdiv_rn": _binary(np.true_divide, "f"),
    "__frcp_rn": _unary(lambda x: np.asarray(1.0, x.dtype) / x, "f"),
    "__fsqrt_rn": _unary(np.sqrt, "f"),
    "isnan": _predicate(np.isnan),
    "isinf": _predicate(np.isinf),
    "isfinite": _predicate(np.isfinite),
    "signbit": _predicate(np.signbit),
    "__popc": _int_fn(_popc),
    "__clz": _int_fn(_clz),
    "__ffs": _int_fn(_ffs),
    "fmaf": _fma,
    "fma": _fma_any,
    "__mul24": _mul24(True),
    "__umul24": _mul24(False),
    "__brev": _int_fn(_brev, result=ct.UINT),
    "__byte_perm": _byte_perm,
    "__float2int_rd": _float2int_dir(np.floor, ct.INT),
    "__float2int_ru": _float2int_dir(np.ceil, ct.INT),
    "__float2uint_rn": _float2int_dir(np.rint, ct.UINT),
    "__float2uint_rz": _float2int_dir(np.trunc, ct.UINT),
    "__float2uint_rd": _float2int_dir(np.floor, ct.UINT),
    "__float2uint_ru": _float2int_dir(np.ceil, ct.UINT),
    "__float2ll_rn": _float2int_dir(np.rint, ct.LLONG),
    "__float2ll_rz": _float2int_dir(np.trunc, ct.LLONG),
    "__uint2float_rn": _to(ct.FLOAT),
    "__ll2float_rn": _to(ct.FLOAT),
    "__int2double_rn": _to(ct.DOUBLE),
    "__double2float_rn": _to(ct.FLOAT),
    "__dadd_rn": _binary(np.add, "d2"),
    "__dmul_rn": _binary(np.multiply, "d2"),
    "__fmaf_rn": _fma,
    "__saturatef": _saturate,
    # overloaded / double versions
    "exp": _unary(np.exp, "d"),
    "log": _unary(np.log, "d"),
    "sqrt": _unary(np.sqrt, "d"),
    "rsqrt": _unary(_rsqrt, "d"),
    "tanh": _unary(np.tanh, "d"),
    "erf": _unary(erf, "d"),
    "fabs": _unary(np.abs, "d"),
    "floor": _unary(np.floor, "d"),
    "ceil": _unary(np.ceil, "d"),
    "sin": _unary(np.sin, "d"),
    "cos": _unary(np.cos, "d"),
    "pow": _binary(np.power),
    "fmax": _binary(np.fmax),
    "fmin": _binary(np.fmin),
    "max": _minmax(np.fmax, np.maximum),
    "min": _minmax(np.fmin, np.minimum),
    "abs": _abs,
    # conversions
    "__float2half": _to(ct.HALF, via_float=True),
    "__float2half_rn": _to(ct.HALF, via_float=True),
    "__half2float": _to(ct.FLOAT),
    "__float2bfloat16": _to(ct.BF16, via_float=True),
    "__float2bfloat16_rn": _to(ct.BF16, via_float=True),
    "__bfloat162float": _to(ct.FLOAT),
    "__int2float_rn": _to(ct.FLOAT),
    "__float2int_rz": _to(ct.INT),
    "__float2int_rn": _float2int_rn,
    "__float_as_int": lambda m, a, k, n: Val(
        ct.INT, np.asarray(convert(a[0], ct.FLOAT).data).view(np.int32)
    ),
    "__int_as_float": lambda m, a, k, n: Val(
        ct.FLOAT, np.asarray(convert(a[0], ct.INT).data).view(np.float32)
    ),
}
# vector constructors: `make_<type><n>` for every vector type the headers define
_NOT_MADE = ("__", "nv_", "half", "dim")  # no make_ function for these
MATH.update(
    {f"make_{name}": _make(name, t.count) for name, t in ct.NAMED.items()
     if t.kind == "vec" and name[-1] in "1234" and not name.startswith(_NOT_MADE)}
)  # fmt: skip
