"""Traced values: floats that remember how they were computed (`InterpOptions(trace=True)`).

In a traced run every floating-point type is stored as a numpy object array of `Sym`: a concrete
float64 value (which control flow, comparisons and indices use) plus the operation and operands
that made it. Global-memory inputs are leaves (`Sym.leaf("x", 17)`), so each output element comes
back as an expression over input elements, whatever threads, tiles, shuffles or shared-memory
staging computed it; `migrator.lift` turns those expressions into a tensor program.

numpy dispatches object arrays element by element (`np.exp` calls `Sym.exp`): traced runs are
for the lifter's small sizes, never for scoring. A traced value that is turned into an integer
or raw bytes has left the data flow the trace can follow: that raises `TraceEscape`, so a lift
never rests on a value the trace lost.
"""

from __future__ import annotations

import ctypes
import math
import operator
from functools import cache
from typing import Any

import numpy as np

from migrator.cuda.interp.ctypes_ import CType

OBJECT = np.dtype(object)


class TraceEscape(TypeError):
    """A traced float used where the trace cannot follow it (as an integer, as bytes)."""


def _v(x: Any) -> float:
    return x.v if isinstance(x, Sym) else float(x)


# The row of the preprocessed source whose expression is being evaluated (the interpreter sets
# it in a traced run): every Sym remembers where it was computed, so a lifted program can name
# the CUDA lines behind each of its parts.
AT: list[tuple[int, int]] = [(-1, -1)]


class Sym:
    """One traced scalar: value `v`, operation `op`, operands `args` (Syms or numbers), and `at`:
    the preprocessed-source rows of the expression that computed it and of the kernel statement
    that led there (a device helper's caller); -1: an input.

    Leaves: op "in" (args: tensor name, flat element index), "param" (args: scalar name)."""

    __slots__ = ("v", "op", "args", "at")

    def __init__(self, v: float, op: str, args: tuple[Any, ...]) -> None:
        self.v = v
        self.op = op
        self.args = args
        self.at = AT[0]

    @staticmethod
    def leaf(tensor: str, index: int, value: float) -> Sym:
        return Sym(float(value), "in", (tensor, index))

    @staticmethod
    def param(name: str, value: float) -> Sym:
        return Sym(float(value), "param", (name,))

    # arithmetic ----------------------------------------------------------------------------
    # (the operand's value inline, not through `_v`: numpy calls these once per element)
    def __add__(self, o: Any) -> Sym:
        return Sym(self.v + (o.v if type(o) is Sym else float(o)), "+", (self, o))

    def __radd__(self, o: Any) -> Sym:
        return Sym((o.v if type(o) is Sym else float(o)) + self.v, "+", (o, self))

    def __sub__(self, o: Any) -> Sym:
        return Sym(self.v - (o.v if type(o) is Sym else float(o)), "-", (self, o))

    def __rsub__(self, o: Any) -> Sym:
        return Sym((o.v if type(o) is Sym else float(o)) - self.v, "-", (o, self))

    def __mul__(self, o: Any) -> Sym:
        return Sym(self.v * (o.v if type(o) is Sym else float(o)), "*", (self, o))

    def __rmul__(self, o: Any) -> Sym:
        return Sym((o.v if type(o) is Sym else float(o)) * self.v, "*", (o, self))

    def __truediv__(self, o: Any) -> Sym:
        return Sym(_div(self.v, _v(o)), "/", (self, o))

    def __rtruediv__(self, o: Any) -> Sym:
        return Sym(_div(_v(o), self.v), "/", (o, self))

    def __pow__(self, o: Any) -> Sym:
        return Sym(_pow(self.v, _v(o)), "pow", (self, o))

    def __rpow__(self, o: Any) -> Sym:
        return Sym(_pow(_v(o), self.v), "pow", (o, self))

    def __neg__(self) -> Sym:
        return Sym(-self.v, "neg", (self,))

    def __pos__(self) -> Sym:
        return self

    def __abs__(self) -> Sym:
        return Sym(abs(self.v), "abs", (self,))

    # comparisons use the concrete value: control flow follows the traced run --------------
    def __lt__(self, o: Any) -> bool:
        return self.v < _v(o)

    def __le__(self, o: Any) -> bool:
        return self.v <= _v(o)

    def __gt__(self, o: Any) -> bool:
        return self.v > _v(o)

    def __ge__(self, o: Any) -> bool:
        return self.v >= _v(o)

    def __eq__(self, o: object) -> bool:  # type: ignore[override]
        return self.v == _v(o) if isinstance(o, (Sym, int, float, np.number)) else False

    def __ne__(self, o: object) -> bool:  # type: ignore[override]
        return not self.__eq__(o)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        return self.v != 0

    def __float__(self) -> float:
        raise TraceEscape("a traced floating-point value is converted to an integer or bytes")

    __int__ = __float__
    __index__ = __float__

    # math functions numpy calls by name on object arrays ------------------------------------
    def exp(self) -> Sym:
        return self._fn("exp", _SAFE_EXP)

    def exp2(self) -> Sym:
        return Sym(_SAFE_EXP2(self.v), "exp2", (self,))

    def log(self) -> Sym:
        return self._fn("log", _SAFE_LOG)

    def log2(self) -> Sym:
        return self._fn("log2", _SAFE_LOG2)

    def sqrt(self) -> Sym:
        return self._fn("sqrt", _SAFE_SQRT)

    def tanh(self) -> Sym:
        return self._fn("tanh", math.tanh)

    def sin(self) -> Sym:
        return self._fn("sin", _SAFE_SIN)

    def cos(self) -> Sym:
        return self._fn("cos", _SAFE_COS)

    def erf(self) -> Sym:
        return self._fn("erf", math.erf)

    # functions the tensor IR writes through the ones above (as NKI would compute them)
    def cosh(self) -> Sym:
        return (self.exp() + (-self).exp()) * 0.5

    def sinh(self) -> Sym:
        return (self.exp() - (-self).exp()) * 0.5

    def tan(self) -> Sym:
        return self.sin() / self.cos()

    def expm1(self) -> Sym:
        return self.exp() - 1.0

    def log1p(self) -> Sym:
        return (self + 1.0).log()

    def log10(self) -> Sym:
        return self.log() * (1.0 / math.log(10.0))

    def _fn(self, name: str, f: Any) -> Sym:
        return Sym(f(self.v), name, (self,))

    def __repr__(self) -> str:
        if self.op == "in":
            return f"{self.args[0]}[{self.args[1]}]"
        if self.op == "param":
            return str(self.args[0])
        return f"{self.op}({', '.join(map(repr, self.args))})"


class Packed:
    """A group of traced elements moved as one wider value (`float4` over eight halves): it can
    be copied and stored back as its elements; any arithmetic on it raises."""

    __slots__ = ("items",)

    def __init__(self, items: tuple[Any, ...]) -> None:
        self.items = items

    def __float__(self) -> float:
        raise TraceEscape("a packed group of traced values used as one number")

    def __repr__(self) -> str:
        return f"Packed{self.items!r}"


def unpack(v: Any, j: int, n: int) -> Any:
    """Element `j` of a packed group of `n` (what a store of it writes)."""
    if isinstance(v, Packed) and len(v.items) == n:
        return v.items[j]
    if isinstance(v, (Sym, Packed)):
        raise TraceEscape("a value stored as a packed group of traced elements is not one")
    return v  # a number (poison of a lane that loaded nothing, a zero fill): each element


def _safe(f: Any) -> Any:
    def g(x: float) -> float:
        try:
            return f(x)
        except (ValueError, OverflowError):
            return math.nan if x == x and x < 0 else math.inf

    return g


# (made once: `_safe` builds a function, which `exp` built anew for every element)
_SAFE_EXP, _SAFE_LOG, _SAFE_LOG2 = _safe(math.exp), _safe(math.log), _safe(math.log2)
_SAFE_SQRT, _SAFE_SIN, _SAFE_COS = _safe(math.sqrt), _safe(math.sin), _safe(math.cos)
_SAFE_EXP2 = _safe(lambda x: 2.0**x)


def _div(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1, b)
    return a / b


def _pow(a: float, b: float) -> float:
    try:
        return float(a**b) if not (a < 0 and b != int(b)) else math.nan
    except (OverflowError, ZeroDivisionError):
        return math.inf


def _max(a: Any, b: Any) -> Any:
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return a if _v(a) >= _v(b) else b
    return Sym(max(_v(a), _v(b)), "max", (a, b))


def _min(a: Any, b: Any) -> Any:
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return a if _v(a) <= _v(b) else b
    return Sym(min(_v(a), _v(b)), "min", (a, b))


def _select(op: str, lhs: Any, rhs: Any, a: Any, b: Any) -> Any:
    """`lhs op rhs ? a : b` with a traced comparison: a select node."""
    return Sym(_v(a) if _TAKE[op](_v(lhs), _v(rhs)) else _v(b), "select", (op, lhs, rhs, a, b))


_TAKE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _divide(a: Any, b: Any) -> Any:
    if isinstance(a, Sym) or isinstance(b, Sym):
        return a / b
    return _div(_v(a), _v(b))  # IEEE: x/0 is inf or NaN, never ZeroDivisionError


def object_ids(a: np.ndarray) -> np.ndarray:
    """`id` of every element of an object array, as int64: an object array holds one object
    pointer per element, which is what CPython's `id` returns, so the ids are the array's own
    memory read as integers (a hundred times quicker than calling `id` per element, which was
    a third of a traced run that shares values across lanes)."""
    a = np.ascontiguousarray(a)
    if a.dtype != OBJECT or a.itemsize != 8:  # (not a 64-bit CPython object array)
        return np.frompyfunc(id, 1, 1)(a).astype(np.int64)
    words = (ctypes.c_int64 * a.size).from_address(a.__array_interface__["data"][0])
    return np.frombuffer(words, dtype=np.int64).copy()  # (copied while `a` is alive)


_MIN_DISTINCT = 64  # below this many elements, finding the distinct operands costs more
_LOOK = 256


def per_distinct(fn: Any, *xs: Any, commutative: bool = False) -> Any:
    """`fn` over object arrays, called once per distinct tuple of operand objects and the
    result shared by every element that has that tuple. A traced run computes one value on
    every lane of a block (a row's mean after a block reduce: the same Sym on 256 lanes), and
    a butterfly reduce pairs lane i with i^k and i^k with i: building each node once is what
    keeps a traced run's cost near its number of distinct values. `commutative` (+ and *, exact
    in IEEE): (a, b) and (b, a) are one tuple."""
    arrs = [np.asarray(x) for x in xs]
    shape = np.broadcast_shapes(*(a.shape for a in arrs))
    n = math.prod(shape)
    if n < _MIN_DISTINCT or any(a.dtype != OBJECT for a in arrs if a.size > 1):
        return fn(*xs)
    flat = [np.broadcast_to(a, shape).reshape(-1) if a.size > 1 else a for a in arrs]
    # a look at the first lanes (a block, whole warps) first: where those are all distinct
    # (a GEMM's accumulators), finding the distinct tuples over every lane costs for nothing
    look = _operand_ids([f[:_LOOK] for f in flat if f.size > 1], commutative)
    enough = 0.9 * min(n, _LOOK)
    # (one column of distinct objects makes the tuples distinct: the last, an accumulator
    # where a multiply-add adds into one, is looked at first, a sort instead of a set)
    last = np.sort(look[-1])
    if 1 + np.count_nonzero(last[1:] != last[:-1]) > enough:
        return fn(*xs)
    if len(set(zip(*[ids.tolist() for ids in look], strict=True))) > enough:
        return fn(*xs)
    first, inverse = distinct_rows(_operand_ids([f for f in flat if f.size > 1], commutative))
    if len(first) > n // 2:  # mostly distinct: the plain call
        return fn(*xs)
    part = np.asarray(fn(*[f[first] if f.size > 1 else f for f in flat]), dtype=OBJECT)
    return part[inverse.reshape(-1)].reshape(shape)


def _operand_ids(columns: list[np.ndarray], commutative: bool) -> list[np.ndarray]:
    """The object ids of each operand column; of a commutative pair, the smaller id first."""
    ids = [object_ids(col) for col in columns]
    if commutative and len(ids) == 2:
        return [np.minimum(ids[0], ids[1]), np.maximum(ids[0], ids[1])]
    return ids


def distinct_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of equal-length integer columns: the index of each one's first
    occurrence, and for every row the number of its distinct row (an index into the first).
    Dense codes (< n) per column are folded together, never a product that could overflow."""
    code = None
    for col in columns[:-1]:
        dense = np.unique(col, return_inverse=True)[1].reshape(-1)
        if code is None:
            code = dense  # (dense already: the first column's codes)
            continue
        code = np.unique(code * (int(dense.max()) + 1) + dense, return_inverse=True)[1]
        code = code.reshape(-1)
    if code is None:
        code = np.zeros(columns[0].size, dtype=np.int64)
    dense = np.unique(columns[-1], return_inverse=True)[1].reshape(-1)
    _, first, inverse = np.unique(code * (int(dense.max()) + 1) + dense, return_index=True,
                                  return_inverse=True)  # fmt: skip
    return first, inverse.reshape(-1)


def _distinct_ufunc(f: Any) -> Any:
    return lambda *xs: per_distinct(f, *xs)


DIVIDE = _distinct_ufunc(np.frompyfunc(_divide, 2, 1))
MAX = _distinct_ufunc(np.frompyfunc(_max, 2, 1))
MIN = _distinct_ufunc(np.frompyfunc(_min, 2, 1))
SELECT = _distinct_ufunc(np.frompyfunc(_select, 5, 1))

# numpy functions a traced run replaces by an object-aware one (numpy's own object loops
# for these return one operand, losing the operation)
OBJECT_FUNCTIONS: dict[Any, Any] = {
    np.fmax: MAX,
    np.maximum: MAX,
    np.fmin: MIN,
    np.minimum: MIN,
}


def _fused(op: str) -> Any:
    def node(a: Any, b: Any, c: Any) -> Any:
        if type(c) is Sym:  # (an accumulator: a number only before its first step)
            try:
                return Sym(a.v * b.v + c.v, op, (a, b, c))
            except AttributeError:
                pass
        # a number among them: the two operations, as written
        return a * b + c if op == "fma" else c + a * b

    return np.frompyfunc(node, 3, 1)


# `a * b + c` and `c + a * b`: the order of the terms is kept (as the two operations spelled
# apart keep it), so the canonical form is theirs in every respect
_FMA = {"fma": _fused("fma"), "acc+fma": _fused("acc+fma")}


def multiply_add(x: Any, y: Any, z: Any, sum_first: bool = False, distinct: bool = True) -> Any:
    """`x * y + z` (or `z + x * y`, `sum_first`) over object data, as one node per element
    (op "fma" or "acc+fma", operands (x, y, z)) where all three are traced: the product and
    the sum of a GEMM's inner step are most of its traced run, and one node costs half of two
    (the canonical form is the sum's, the value the same float64 arithmetic). Built once per
    distinct triple, as `per_distinct` says (`distinct`: as C's `+` and `*` are; fmaf and
    __hfma build a node per element, as they always have)."""
    fn = _FMA["acc+fma" if sum_first else "fma"]
    return per_distinct(fn, x, y, z) if distinct else fn(x, y, z)


FMA_OPS = frozenset(_FMA)


def elementwise(fn: Any, nargs: int) -> Any:
    """`fn` applied element by element to object data: the object-aware replacement where
    numpy's own object loop loses the operation, else `fn` per element (a Sym operand builds a
    node through its method of the same name; a plain number is computed as a number)."""
    return OBJECT_FUNCTIONS.get(fn) or _distinct_ufunc(np.frompyfunc(fn, nargs, 1))


def is_traced(t: CType) -> bool:
    return t.dtype == OBJECT


@cache
def traced(t: CType) -> CType:
    """The traced counterpart of a floating-point type (same name, object storage)."""
    return CType(t.name, "float", OBJECT, nominal=t.size)  # sizeof() as in the program


def as_object(x: Any) -> Any:
    """Numeric data as object data (numbers become Python numbers: constants in the trace)."""
    a = np.asarray(x)
    if a.dtype == OBJECT:
        return x
    out = a.astype(OBJECT)
    return out if out.ndim else out[()]
