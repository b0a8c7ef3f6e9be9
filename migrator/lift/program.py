"""The tensor IR: what a kernel computes, free of threads, tiles and pointers.

A `Program` is one `Assign` per output tensor: `out[i, j] = <expr>`, where an expression is a
tree of loads (`x[i, k]`, each index an affine, or div/mod quasi-affine, map of the output
coordinates and the reduction variables in scope), constants, scalar parameters, elementwise
operations and reductions along a variable (`sum_k`, `max_k`). Every number that depends on the
problem size (an extent, a stride, `1/N`) is kept as a size expression, so the program holds at
every size. It prints as math (`render`) and runs with numpy (`evaluate`), which is how the lifter
verifies it against the CUDA interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from migrator.contract import eval_expr
from migrator.cuda.interp.traced import distinct_rows

Number = int | float | str  # a literal, or a size expression such as "N" or "1 / C"

REDUCE_OPS = ("sum", "prod", "max", "min")
# operations on integer values (a bin computed from a key), as C spells them: `mod` is C's `%`
# (the sign of the dividend), `shr` a right shift
INT_OPS = {"mod": "%", "and": "&", "shr": ">>"}
FUNCTIONS = ("exp", "exp2", "log", "log2", "sqrt", "tanh", "sin", "cos", "erf", "abs")


class LiftError(ValueError):
    """The kernel's traced outputs are not (yet) expressible as a tensor program."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Term(_Model):
    """`coef * var`, where `var` may be taken `// div` then `% mod` (quasi-affine indices)."""

    coef: Number
    var: str
    div: Number | None = None
    mod: Number | None = None

    def render(self) -> str:
        v = self.var
        if self.div is not None:
            v = f"({v} // {_paren(self.div)})"
        if self.mod is not None:
            v = f"({v} % {_paren(self.mod)})"
        c = self.coef
        if c == 1:
            return v
        if c == -1:
            return f"-{v}"
        return f"{_paren(c)}*{v}"


class IndexMap(_Model):
    """One coordinate of a load: `const + sum(terms)`, plus `coef * table[index]` where the
    coordinate is read from an integer tensor (a gather: an embedding's token id, a label)."""

    terms: list[Term] = Field(default_factory=list)
    const: Number = 0
    gather: Gather | None = None

    def render(self) -> str:
        parts = [t.render() for t in self.terms]
        if self.gather is not None:
            parts.insert(0, self.gather.render())
        if self.const != 0 or not parts:
            parts.append(str(self.const))
        out = " + ".join(parts)
        return out.replace("+ -", "- ")


class Gather(_Model):
    """`coef * tensor[index]`: a coordinate taken from an integer tensor's element (every index
    of the gathered tensor must lie inside the table it selects from)."""

    tensor: str
    index: list[IndexMap]
    coef: Number = 1

    def render(self) -> str:
        at = f"{self.tensor}[{', '.join(i.render() for i in self.index)}]"
        return at if self.coef == 1 else f"{_paren(self.coef)}*{at}"


IndexMap.model_rebuild()


def index_maps(e: Expr) -> list[IndexMap]:
    """Every index map `e` evaluates at the output coordinates: its loads' indices, the
    coordinates it compares (a mask) and the bounds of ranges that follow the element."""
    maps = [m for x in e.walk() if x.kind in ("load", "coord") for m in x.index]
    return maps + [x.upto for x in e.walk() if x.kind == "reduce" and x.upto is not None]


def index_terms(m: IndexMap) -> list[Term]:
    """Every term of a coordinate, those of a gather's own index included."""
    out = list(m.terms)
    if m.gather is not None:
        for g in m.gather.index:
            out.extend(index_terms(g))
    return out


class Expr(_Model):
    """One node. kind: load (tensor, index), const (value), param (name), op (op, args),
    reduce (op, var, extent, args[0] the body), coord (index[0]: the value of an index map of
    the coordinates, such as the bin a count compares with)."""

    kind: Literal["load", "const", "param", "op", "reduce", "coord"]
    tensor: str | None = None
    index: list[IndexMap] = Field(default_factory=list)
    value: Number | None = None
    name: str | None = None
    op: str | None = None
    args: list[Expr] = Field(default_factory=list)
    var: str | None = None
    extent: Number | None = None
    # a range that depends on the element (`k < (i % 256) + 1`, a prefix sum): the reduction
    # runs over `var < upto`, evaluated at the output coordinates; `extent` is then None
    upto: IndexMap | None = None
    # a load whose index may leave the tensor (a convolution's window at the image's edges):
    # the value read there (0.0: zero padding); None: the index never leaves it
    pad: Number | None = None

    def walk(self) -> list[Expr]:
        out = [self]
        for a in self.args:
            out.extend(a.walk())
        return out

    def render(self) -> str:
        k = self.kind
        if k == "load":
            at = ", ".join(i.render() for i in self.index)
            if self.pad is not None:  # `zeropad(x)[i, j + k - 8]`: 0 outside x
                return f"{'zeropad' if self.pad == 0 else f'pad{self.pad}'}({self.tensor})[{at}]"
            return f"{self.tensor}[{at}]"
        if k == "const":
            return str(self.value)
        if k == "param":
            return str(self.name)
        if k == "coord":
            return self.index[0].render()
        if k == "reduce":
            bound = self.upto.render() if self.upto is not None else self.extent
            return f"{self.op}_{{{self.var} < {bound}}} {_atom(self.args[0])}"
        op, a = self.op or "", self.args
        if op == "+":  # `x + (-1 * y)` reads `x - y`
            pos = [_atom(x) for x in a if negated(x) is None]
            neg = [_atom(n) for x in a if (n := negated(x)) is not None]
            head = " + ".join(pos) if pos else f"-{neg.pop(0)}"
            return " - ".join([head, *neg])
        if op == "*":
            return f" {op} ".join(_atom(x) for x in a)
        if op in ("-", "/"):
            return f"{_atom(a[0])} {op} {_atom(a[1])}"
        if op in INT_OPS:
            return f"{_atom(a[0])} {INT_OPS[op]} {_atom(a[1])}"
        if op == "neg":
            return f"-{_atom(a[0])}"
        if op == "select":
            return f"({_atom(a[0])} {self.name} {_atom(a[1])} ? {a[2].render()} : {a[3].render()})"
        return f"{op}({', '.join(x.render() for x in a)})"


Expr.model_rebuild()


def negated(e: Expr) -> Expr | None:
    """`y` when `e` is `-1 * y` (how the lifter's canonical form writes a subtraction)."""
    if e.kind != "op" or e.op != "*" or len(e.args) < 2:
        return None
    minus = [x for x in e.args if x.kind == "const" and x.value == -1]
    if len(minus) != 1:
        return None
    rest = [x for x in e.args if x is not minus[0]]
    return rest[0] if len(rest) == 1 else Expr(kind="op", op="*", args=rest)


MAX_EXPANDED_TERMS = 16  # products of sums expanded to compare a select's branches


def _expanded(e: Expr) -> list[tuple[float, tuple[str, ...], list[Expr]]] | None:
    """`e` as a sum of products (coefficient, sorted factor keys, factors): sums and products
    distributed, anything else one factor; None past MAX_EXPANDED_TERMS terms."""
    if e.kind == "const" and isinstance(e.value, (int, float)):
        return [(float(e.value), (), [])]
    if e.kind == "op" and e.op == "+":
        out: list[tuple[float, tuple[str, ...], list[Expr]]] = []
        for a in e.args:
            sub = _expanded(a)
            if sub is None:
                return None
            out += sub
        return out if len(out) <= MAX_EXPANDED_TERMS else None
    if e.kind == "op" and e.op == "neg":
        sub = _expanded(e.args[0])
        return None if sub is None else [(-c, k, f) for c, k, f in sub]
    if e.kind == "op" and e.op == "*":
        acc: list[tuple[float, tuple[str, ...], list[Expr]]] = [(1.0, (), [])]
        for a in e.args:
            sub = _expanded(a)
            if sub is None or len(acc) * len(sub) > MAX_EXPANDED_TERMS:
                return None
            acc = [(c1 * c2, tuple(sorted(k1 + k2)), f1 + f2)
                   for c1, k1, f1 in acc for c2, k2, f2 in sub]  # fmt: skip
        return acc
    return [(1.0, (e.render(),), [e])]


def _rebuilt(terms: list[tuple[float, tuple[str, ...], list[Expr]]]) -> Expr:
    parts = []
    for c, _, factors in terms:
        args = ([] if c == 1 else [Expr(kind="const", value=_tidy_number(c))]) + factors
        parts.append(args[0] if len(args) == 1 else Expr(kind="op", op="*", args=args)
                     if args else Expr(kind="const", value=1))  # fmt: skip
    return parts[0] if len(parts) == 1 else Expr(kind="op", op="+", args=parts)


def _tidy_number(c: float) -> int | float:
    return int(c) if float(c).is_integer() else c


def select_as_difference(e: Expr) -> Expr | None:
    """`c ? b + d : b` as `b + (c ? d : 0)` (and `c ? b : b + d` as `b + (c ? 0 : d)`) where
    one branch, expanded, is the other's terms and a few more: cross-entropy's gradient
    `j == t[i] ? g * (p - 1) : g * p` is `g * p - (j == t[i] ? g : 0)`, one product and a select
    of a per-row value instead of two products; None for any other select."""
    if e.kind != "op" or e.op != "select":
        return None
    t, f = _expanded(e.args[2]), _expanded(e.args[3])
    if t is None or f is None:
        return None
    for big, small, taken in ((t, f, True), (f, t, False)):
        left = list(big)
        for c, k, _ in small:
            hit = next((n for n, (c2, k2, _) in enumerate(left) if k2 == k and c2 == c), None)
            if hit is None:
                break
            left.pop(hit)
        else:
            if not left or len(left) == len(big):
                continue
            d = _rebuilt(left)
            zero = Expr(kind="const", value=0)
            sel = e.model_copy(update={"args": [*e.args[:2], *((d, zero) if taken else (zero, d))]})
            base = e.args[3] if taken else e.args[2]
            return Expr(kind="op", op="+", args=[base, sel])
    return None


class Assign(_Model):
    """`tensor[vars] = expr` over the whole output (`vars` name its coordinates)."""

    tensor: str
    vars: list[str]
    expr: Expr

    def render(self) -> str:
        return f"{self.tensor}[{', '.join(self.vars)}] = {self.expr.render()}"


class Program(_Model):
    assigns: list[Assign]

    def render(self) -> str:
        return "\n".join(a.render() for a in self.assigns)


def _paren(c: Number) -> str:
    s = str(c)
    return f"({s})" if isinstance(c, str) and any(ch in s for ch in " +-/*") else s


def _atom(e: Expr) -> str:
    s = e.render()
    if e.kind == "const" and isinstance(e.value, str) and any(ch in s for ch in " +-/*"):
        return f"({s})"
    if e.kind == "op" and e.op in ("+", "-", "*", "/", "neg", "select", *INT_OPS):
        return f"({s})"
    if e.kind == "reduce":
        return f"({s})"
    return s


# --- evaluation ------------------------------------------------------------------------------
_NP_FUNCS = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
             "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "abs": np.abs}  # fmt: skip
_NP_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
_NP_BINARY = {"+": np.add, "*": np.multiply, "-": np.subtract, "/": np.divide,
              "max": np.maximum, "min": np.minimum, "pow": np.power}  # fmt: skip


def value_of(n: Number, sizes: Mapping[str, int]) -> float | int:
    return eval_expr(n, sizes) if isinstance(n, str) else n


def evaluate(
    program: Program,
    tensors: Mapping[str, np.ndarray],
    shapes: Mapping[str, tuple[int, ...]],
    sizes: Mapping[str, int],
    params: Mapping[str, float],
    points: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Run the program with numpy in float64: one array per assigned tensor (its `shapes`), or,
    for a tensor named in `points`, its values at those flat indices only (a sample: the cost
    of a large verification is then the sample times the reduction extents, not the tensor)."""
    out: dict[str, np.ndarray] = {}
    for a in program.assigns:
        shape = shapes[a.tensor]
        depth = _depth(a.expr)
        env: dict[str, np.ndarray] = {}
        at = None if points is None else points.get(a.tensor)
        sampled = at is not None
        if at is None and _flat_rows(a):
            # rows read through `i // L` from a flat output: evaluated as every point, so that
            # each row's reductions are computed once (a dense broadcast would do it per element)
            at = np.arange(math.prod(shape))
        if at is None:
            nd = len(shape) + depth
            for ax, (v, n) in enumerate(zip(a.vars, shape, strict=True)):
                env[v] = np.arange(n).reshape([n if d == ax else 1 for d in range(nd)])
            val = _eval(a.expr, env, len(shape), nd, tensors, sizes, params)
            full = np.broadcast_to(np.asarray(val, dtype=np.float64), tuple(shape) + (1,) * depth)
            out[a.tensor] = full.reshape(shape).copy()
            continue
        flat = np.asarray(at, dtype=np.int64)
        nd = 1 + depth
        coords = np.unravel_index(flat, shape) if shape else ()
        for v, c in zip(a.vars, coords, strict=True):
            env[v] = np.asarray(c).reshape((flat.size,) + (1,) * depth)
        val = _eval(a.expr, env, 1, nd, tensors, sizes, params, points=frozenset(a.vars))
        got = np.broadcast_to(np.asarray(val, dtype=np.float64), (flat.size,) + (1,) * depth)
        out[a.tensor] = got.reshape(flat.size if sampled else shape).copy()
    return out


def _depth(e: Expr) -> int:
    inner = max((_depth(a) for a in e.args), default=0)
    return inner + (1 if e.kind == "reduce" else 0)


def _eval(
    e: Expr,
    env: dict[str, np.ndarray],
    level: int,
    nd: int,
    tensors: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    params: Mapping[str, float],
    points: frozenset[str] = frozenset(),
) -> np.ndarray:
    """`points`: the output variables, where the outputs are a sample of points (one axis)."""

    def ev(x: Expr, lv: int = level) -> np.ndarray:
        return _eval(x, env, lv, nd, tensors, sizes, params, points)

    k = e.kind
    if k == "const":
        return np.float64(value_of(e.value if e.value is not None else 0, sizes))
    if k == "coord":
        return np.asarray(_index(e.index[0], env, sizes, tensors), dtype=np.float64)
    if k == "param":
        if e.name not in params:
            raise LiftError(f"no value for the scalar {e.name!r}")
        return np.float64(params[e.name or ""])
    if k == "load":
        arr = tensors[e.tensor or ""]
        whole = _whole_axes(e, arr, env, nd, sizes)
        if whole is not None:
            return np.asarray(whole, dtype=np.float64)
        idx = [_index(m, env, sizes, tensors) for m in e.index]
        if len(idx) != arr.ndim:
            raise LiftError(f"{e.tensor} has {arr.ndim} dimensions, the load {len(idx)}")
        if e.pad is not None:  # the pad value outside the tensor
            inside = np.ones(np.broadcast_shapes(*(np.shape(ix) for ix in idx)), dtype=bool)
            for ix, n in zip(idx, arr.shape, strict=True):
                inside &= (ix >= 0) & (ix < n)
            at = tuple(np.clip(ix, 0, n - 1) for ix, n in zip(idx, arr.shape, strict=True))
            got = np.asarray(arr[at], dtype=np.float64)
            return np.where(inside, got, np.float64(value_of(e.pad, sizes)))
        for d, (ix, n) in enumerate(zip(idx, arr.shape, strict=True)):
            if np.any(ix < 0) or np.any(ix >= n):
                raise LiftError(f"{e.render()} reads outside {e.tensor} (dimension {d})")
        return np.asarray(arr[tuple(idx)], dtype=np.float64)
    if k == "reduce" and points and level == 1:
        # sampled points share rows: a row's sum is computed once per distinct row among them
        # (the values of the output coordinates it reads), not once per point of the row
        count = next(iter(env[v] for v in points)).shape[0]
        columns = _row_columns(e, env, sizes, points)
        first, inverse = (
            distinct_rows(columns)
            if columns
            else (np.zeros(1, np.int64), np.zeros(count, np.int64))
        )
        if first.size < count:
            sub = {v: x[first] if v in points else x for v, x in env.items()}
            val = np.asarray(_eval(e, sub, level, nd, tensors, sizes, params))
            return val[inverse.reshape(-1)] if val.ndim else val
    if k == "reduce" and e.upto is not None:
        return _ragged_reduce(e, env, level, nd, tensors, sizes, params, points)
    if k == "reduce":
        n = int(value_of(e.extent or 0, sizes))
        if n <= 0:
            raise LiftError(f"reduction over an empty range ({e.var} < {e.extent})")
        rv = np.arange(n).reshape([n if d == level else 1 for d in range(nd)])
        env[e.var or ""] = rv
        body = np.asarray(ev(e.args[0], level + 1))
        del env[e.var or ""]
        body = np.broadcast_to(body, np.broadcast_shapes(body.shape, rv.shape))
        return _NP_REDUCE[e.op or ""](body, axis=level, keepdims=True)
    args = [ev(a) for a in e.args]
    op = e.op or ""
    with np.errstate(all="ignore"):
        if op == "neg":
            return np.negative(args[0])
        if op in _NP_FUNCS:
            return _NP_FUNCS[op](args[0])
        if op == "erf":
            from migrator.cuda.interp.builtins import erf

            return erf(args[0])
        if op in INT_OPS:
            x, y = (np.asarray(v).astype(np.int64) for v in args)
            if op == "mod":
                r = np.fmod(x, np.where(y == 0, 1, y))
            else:
                r = x & y if op == "and" else x >> y
            return r.astype(np.float64)
        if op == "select":
            cmp = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                   "==": np.equal}  # fmt: skip
            return np.where(cmp[e.name or ""](args[0], args[1]), args[2], args[3])
        if op in ("+", "*") and len(args) > 2:
            acc = args[0]
            for x in args[1:]:
                acc = _NP_BINARY[op](acc, x)
            return acc
        if op in _NP_BINARY:
            return _NP_BINARY[op](args[0], args[1])
    raise LiftError(f"no numpy form for the operation {op!r}")


_IDENTITY = {"sum": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}


def _ragged_reduce(
    e: Expr,
    env: dict[str, np.ndarray],
    level: int,
    nd: int,
    tensors: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    params: Mapping[str, float],
    points: frozenset[str],
) -> np.ndarray:
    """A reduction over `var < upto(coordinates)`: the longest range, each element's terms past
    its own bound replaced by the operation's identity (and read at its last term, so that no
    index leaves the tensor)."""
    assert e.upto is not None
    bound = np.asarray(_index(e.upto, env, sizes, tensors))
    n = int(bound.max()) if bound.size else 0
    shape = list(bound.shape) + [1] * (nd - bound.ndim)
    bound = bound.reshape(shape)
    if n <= 0:
        return np.full(np.broadcast_shapes(tuple(shape), (1,) * nd), _IDENTITY[e.op or ""])
    rv = np.arange(n).reshape([n if d == level else 1 for d in range(nd)])
    inside = rv < bound
    env[e.var or ""] = np.minimum(rv, np.maximum(bound - 1, 0))
    body = np.asarray(_eval(e.args[0], env, level + 1, nd, tensors, sizes, params, points))
    del env[e.var or ""]
    full = np.broadcast_shapes(body.shape, inside.shape)
    body = np.where(np.broadcast_to(inside, full), np.broadcast_to(body, full),
                    _IDENTITY[e.op or ""])  # fmt: skip
    return _NP_REDUCE[e.op or ""](body, axis=level, keepdims=True)


def _whole_axes(
    e: Expr, arr: np.ndarray, env: dict[str, np.ndarray], nd: int, sizes: Mapping[str, int]
) -> np.ndarray | None:
    """`x[i, k]` where each index is a variable ranging over the whole dimension in order (a
    dense output axis, a reduction): the array itself, its axes moved to the variables' axes,
    instead of a gather through index arrays as large as the result."""
    if len(e.index) != arr.ndim:
        return None
    axes: list[int] = []
    for m, n in zip(e.index, arr.shape, strict=True):
        if m.gather is not None or len(m.terms) != 1 or value_of(m.const, sizes) != 0:
            return None
        t = m.terms[0]
        if t.div is not None or t.mod is not None or value_of(t.coef, sizes) != 1:
            return None
        x = env.get(t.var)
        if x is None or x.ndim != nd or x.size != n:
            return None
        ax = [d for d, w in enumerate(x.shape) if w > 1]
        if len(ax) > 1 or not np.array_equal(x.reshape(-1), np.arange(n)):
            return None
        axes.append(ax[0] if ax else -1)  # -1: a dimension of one element
    keep = [d for d in range(arr.ndim) if axes[d] >= 0]
    if len({axes[d] for d in keep}) != len(keep):
        return None  # x[i, i]: a diagonal
    order = sorted(keep, key=lambda d: axes[d])
    shape = [1] * nd
    for d in keep:
        shape[axes[d]] = arr.shape[d]
    kept = arr.reshape([arr.shape[d] for d in keep])  # dimensions of one element dropped
    return np.transpose(kept, [keep.index(d) for d in order]).reshape(shape)


def _flat_rows(a: Assign) -> bool:
    """Whether a reduction of `a` reads an output coordinate through a div or mod."""
    return any(t.var in a.vars and (t.div is not None or t.mod is not None)
               for r in a.expr.walk() if r.kind == "reduce" for x in r.walk()
               if x.kind == "load" for m in x.index for t in index_terms(m))  # fmt: skip


def _row_columns(
    e: Expr, env: dict[str, np.ndarray], sizes: Mapping[str, int], points: frozenset[str]
) -> list[np.ndarray]:
    """Per sampled point, the value of each index term of an output variable that `e` reads
    (`i // 64` for rows of 64): points equal in all of them read the same elements."""
    terms = {(t.var, t.div, t.mod) for m in index_maps(e) for t in index_terms(m)
             if t.var in points}  # fmt: skip
    columns = []
    for var, div, mod in sorted(terms, key=repr):
        v = env[var].reshape(-1)
        v = v // _divisor(div, sizes) if div is not None else v
        columns.append(v % _divisor(mod, sizes) if mod is not None else v)
    return columns


def _divisor(d: Number, sizes: Mapping[str, int]) -> int:
    """A div/mod size at `sizes`; a program whose divisor is 0 there (`C / NH` at C < NH) does
    not hold there: said, not computed with numpy's zeros."""
    v = int(value_of(d, sizes))
    if v <= 0:
        raise LiftError(f"the divisor {d} is {v} at {dict(sizes)}")
    return v


def _index(
    m: IndexMap,
    env: dict[str, np.ndarray],
    sizes: Mapping[str, int],
    tensors: Mapping[str, np.ndarray] | None = None,
) -> np.ndarray:
    acc: np.ndarray = np.int64(value_of(m.const, sizes))  # type: ignore[assignment]
    if m.gather is not None:
        g = m.gather
        table = (tensors or {}).get(g.tensor)
        if table is None:
            raise LiftError(f"no values for the index tensor {g.tensor!r}")
        at = [_index(x, env, sizes, tensors) for x in g.index]
        if len(at) != table.ndim:
            raise LiftError(f"{g.tensor} has {table.ndim} dimensions, the gather {len(at)}")
        for d, (ix, n) in enumerate(zip(at, table.shape, strict=True)):
            if np.any(ix < 0) or np.any(ix >= n):
                raise LiftError(f"{g.render()} reads outside {g.tensor} (dimension {d})")
        picked = np.asarray(table[tuple(at)]).astype(np.int64)
        acc = acc + int(value_of(g.coef, sizes)) * picked
    for t in m.terms:
        v = env[t.var]
        if t.div is not None:
            v = v // _divisor(t.div, sizes)
        if t.mod is not None:
            v = v % _divisor(t.mod, sizes)
        acc = acc + int(value_of(t.coef, sizes)) * v
    return np.asarray(acc, dtype=np.int64)


def magnitude(e: Expr) -> Expr:
    """An expression for the size of the terms `e` adds up: loads and constants by absolute
    value, sums and products of those, reductions over them; any other operation by the
    absolute value of its result (a quotient: the numerator's magnitude over the actual
    denominator). A kernel that accumulates in low precision is off by about its unit
    roundoff times this, not times the result (which may cancel to near zero)."""

    def ab(x: Expr) -> Expr:
        return Expr(kind="op", op="abs", args=[x])

    if e.kind in ("load", "const", "param"):
        return ab(e)
    if e.kind == "reduce":
        return e.model_copy(update={"args": [magnitude(e.args[0])]})
    if e.op in ("+", "*", "max", "min", "neg"):
        return e.model_copy(update={"args": [magnitude(a) for a in e.args]})
    if e.op == "/":
        return Expr(kind="op", op="/", args=[magnitude(e.args[0]), ab(e.args[1])])
    return ab(e)
