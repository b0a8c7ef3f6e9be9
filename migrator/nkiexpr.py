"""CUDA value expressions (`cuda.ir.Expr`) rendered as NKI Python over tiles.

Loads become the tile variables the template loaded them into, kernel parameters become the NKI
kernel's keyword scalars or sizes read from shapes, and CUDA math maps onto `nl.*`. Every op
computes in fp32 on the engines, which matches CUDA's float arithmetic for the float kernels we
migrate; double-typed literals are kept as Python floats (NKI's weak scalars are fp32).
What has no mapping raises `Untranslatable` with the reason, so the caller emits a diagnostic
instead of a wrong kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from migrator.cuda.builtins import FMA
from migrator.cuda.ir import Expr

# CUDA math function -> NKI function (same argument order).
MATH: dict[str, str] = {
    "expf": "nl.exp", "exp": "nl.exp", "__expf": "nl.exp",
    "logf": "nl.log", "log": "nl.log", "__logf": "nl.log",
    "tanhf": "nl.tanh", "tanh": "nl.tanh",
    "sqrtf": "nl.sqrt", "sqrt": "nl.sqrt",
    "rsqrtf": "nl.rsqrt", "rsqrt": "nl.rsqrt",
    "fabsf": "nl.abs", "fabs": "nl.abs", "abs": "nl.abs",
    "erff": "nl.erf", "erf": "nl.erf",
    "sinf": "nl.sin", "cosf": "nl.cos",
    "fmaxf": "nl.maximum", "fmax": "nl.maximum", "max": "nl.maximum",
    "fminf": "nl.minimum", "fmin": "nl.minimum", "min": "nl.minimum",
    "powf": "nl.power", "pow": "nl.power",
    "floorf": "nl.floor", "ceilf": "nl.ceil", "truncf": "nl.trunc",
}  # fmt: skip
# nl functions rather than Python operators: legacy NKI operators do not broadcast along the
# partition axis, and a row vector ([1, F]) meets full tiles in broadcasts
_BINARY = {"+": "nl.add", "-": "nl.subtract", "*": "nl.multiply", "/": "nl.divide"}
_COMPARE = {
    "<": "nl.less", "<=": "nl.less_equal", ">": "nl.greater", ">=": "nl.greater_equal",
    "==": "nl.equal", "!=": "nl.not_equal",
}  # fmt: skip
_FLOAT_CASTS = {"float", "double", "T", "const float", "half", "__half", "__nv_bfloat16"}
# 16-bit conversion intrinsics are casts too: NKI engines compute in fp32 and the store rounds
# to the output tile's dtype (round-to-nearest-even, like the `_rn` forms)
CONVERSIONS = {"__half2float", "__float2half", "__float2half_rn", "__bfloat162float",
               "__float2bfloat16", "__float2bfloat16_rn"}  # fmt: skip


_SCALAR_OPS = {"+", "-", "*"}
_ORDERED = {"nl.subtract", "nl.divide"}  # the scalar instructions' ops whose operand order counts
# C's fmax/fmin against a constant: keep x where this comparison with the constant holds
_MAXNUM = {"fmaxf": "nl.greater", "fmax": "nl.greater", "fminf": "nl.less", "fmin": "nl.less"}


def _nan_reaches(e: Expr) -> set[str]:
    """Keys of the loads whose NaN always reaches `e`'s value: those joined to the root by
    + - * / (either operand), unary minus and casts only, every one of which propagates NaN."""
    out: set[str] = set()

    def walk(n: Expr) -> None:
        if n.kind == "load":
            out.add(_key(n))
        elif (n.kind == "binary" and n.op in _BINARY) or (n.kind == "unary" and n.op == "-"):
            for a in n.args:
                walk(a)
        elif n.kind == "cast" or (n.kind == "call" and n.op in CONVERSIONS):
            walk(n.args[0])

    walk(e)
    return out


def _nan_only_from(x: Expr) -> str | None:
    """The key of the one load `x` is NaN exactly when it is: `x` is that load combined with
    finite non-zero constants by + - * / and unary minus (so an infinite load gives an
    infinite or zero `x`, never NaN); None for any other shape."""
    loads = [n for n in x.walk() if n.kind == "load"]
    if len(loads) != 1:
        return None

    def ok(n: Expr) -> bool:
        if n.kind == "load":
            return True
        if n.kind == "const":
            v = float(n.value or 0.0)
            return n.dtype != "bool" and v != 0.0 and bool(np.isfinite(v))
        if n.kind == "binary" and n.op in _BINARY or n.kind == "unary" and n.op == "-":
            return all(ok(a) for a in n.args)
        if n.kind == "cast" or (n.kind == "call" and n.op in CONVERSIONS):
            return ok(n.args[0])
        return False

    return _key(loads[0]) if ok(x) else None


def _clamp_operands(n: Expr) -> tuple[Expr, Expr]:
    """(operand, constant) of an fmaxf/fminf call against a constant."""
    x, c = n.args
    return (x, c) if c.kind == "const" else (c, x)


def _scalar_only(n: Expr) -> bool:
    """True when `n` reads no memory: constants and scalar parameters combined."""
    if n.kind in ("const", "param"):
        return True
    if n.kind in ("binary", "unary", "cast"):
        return all(_scalar_only(x) for x in n.args)
    return False


# Activation functions the Scalar engine computes in one instruction, by their float64 formula:
# a CUDA expression of one operand that equals one of them everywhere (silu written as
# `v / (1.0f + expf(-v))`, tanh-GELU spelled out) becomes that one instruction instead of a chain
# of Vector engine ops. Decided numerically on sample points, so any spelling is recognised.
_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "nl.sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "nl.silu": lambda x: x / (1.0 + np.exp(-x)),
    "nl.gelu_apprx_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi)
                                                               * (x + 0.044715 * x**3))),
    "nl.gelu": lambda x: 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0))),
    "nl.softplus": lambda x: np.logaddexp(0.0, x),
}  # fmt: skip
_SAMPLES = np.array([-9.5, -4.1, -2.3, -1.7, -1.0, -0.61, -0.25, -0.03, 0.0, 0.04, 0.3, 0.77,
                     1.0, 1.9, 2.6, 4.4, 8.7])  # fmt: skip
_EVAL_CALLS: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp, "tanh": np.tanh, "log": np.log, "sqrt": np.sqrt, "fabs": np.abs,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "fmax": np.fmax, "fmin": np.fmin,
}  # fmt: skip


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf)(x)


def _key(e: Expr) -> str:
    return f"{e.kind}:{e.op}:{e.name}:{e.value}:{[i.canonical for i in e.index]}:" + ",".join(
        _key(a) for a in e.args
    )


def _evaluate(
    e: Expr,
    var: Expr,
    x: np.ndarray,
    sizes: dict[int, tuple[int, int, int]] | None = None,
    shape: Callable[[Expr], int] | None = None,
    memo: dict[int, np.ndarray | None] | None = None,
) -> np.ndarray | None:
    """`e` in float64 with each subtree equal to `var` as x; None if anything else is not
    constant. `sizes` (`_sizes`): subtrees of another size are not compared; `shape`: a
    number per structure, compared instead of the trees, and `memo` the values by structure
    (a subtree the expression repeats is evaluated once)."""
    if shape is not None and memo is not None:
        k = shape(e)
        if k not in memo:
            memo[k] = _evaluate_node(e, var, x, sizes, shape, memo)
        return memo[k]
    return _evaluate_node(e, var, x, sizes, shape, memo)


def _evaluate_node(
    e: Expr,
    var: Expr,
    x: np.ndarray,
    sizes: dict[int, tuple[int, int, int]] | None,
    shape: Callable[[Expr], int] | None,
    memo: dict[int, np.ndarray | None] | None,
) -> np.ndarray | None:
    if e is var or ((sizes is None or sizes.get(id(e)) == sizes.get(id(var))) and (
            shape(e) == shape(var) if shape is not None else e == var)):  # fmt: skip
        return x
    if e.kind == "const" and e.dtype != "bool":
        return np.full_like(x, float(e.value or 0.0))
    if e.kind == "cast" or (e.kind == "call" and e.op in CONVERSIONS):
        return _evaluate(e.args[0], var, x, sizes, shape, memo) if e.args else None
    args = [_evaluate(a, var, x, sizes, shape, memo) for a in e.args]
    if any(a is None for a in args):
        return None
    with np.errstate(all="ignore"):
        if e.kind == "binary" and e.op in ("+", "-", "*", "/"):
            a, b = args
            return {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[e.op]  # type: ignore[operator]
        if e.kind == "unary" and e.op == "-":
            return -args[0]  # type: ignore[operator]
        if e.kind == "call" and e.op:
            name = e.op.removeprefix("__").removesuffix("f")
            if name == "erf":
                return _erf(args[0])  # type: ignore[arg-type]
            fn = _EVAL_CALLS.get(name)
            return fn(*args) if fn is not None else None
    return None


def _sizes(e: Expr, out: dict[int, tuple[int, int, int]]) -> tuple[int, int, int]:
    """(nodes, loads, operations) of `e` and of each subtree (`out`, by id), in one pass."""
    nodes, loads, ops = 1, int(e.kind == "load"), int(e.kind in ("binary", "call", "unary"))
    for a in e.args:
        sub = _sizes(a, out)
        nodes, loads, ops = nodes + sub[0], loads + sub[1], ops + sub[2]
    out[id(e)] = (nodes, loads, ops)
    return nodes, loads, ops


# operations of an activation's spelling around its operand (tanh-GELU spelled out with its
# constants computed, `sqrtf(2.0f / M_PI)`, is about 15)
MAX_ACTIVATION_OPS = 48


def activation_of(e: Expr, shape: Callable[[Expr], int] | None = None) -> tuple[str, Expr] | None:
    """(nl activation, its operand) when `e` computes one activation of one subexpression.
    `shape`: a number per structure (two subtrees are equal where theirs are)."""
    if e.kind not in ("binary", "call", "unary"):
        return None
    sizes: dict[int, tuple[int, int, int]] = {}
    _, loads, ops = _sizes(e, sizes)
    if ops < 3 or not loads:
        return None  # a single op renders as itself
    # the operand reads an input, and its copies hold every load of `e` (so its loads divide
    # theirs), largest first
    # ... and what is left of `e` besides those copies is no longer than an activation's
    # spelling (each candidate is evaluated over all of `e`: BlackScholes' 4000-node option
    # price tried every subtree of every subexpression, 3 s)
    subtrees = sorted((n for n in e.walk()[1:] if sizes[id(n)][1] and not loads % sizes[id(n)][1]
                       and ops - loads // sizes[id(n)][1] * sizes[id(n)][2] <= MAX_ACTIVATION_OPS),
                      key=lambda n: -sizes[id(n)][0])  # fmt: skip
    tried: list[Expr] = []
    for u in subtrees:
        if any((shape(u) == shape(t)) if shape is not None else u == t for t in tried):
            continue
        tried.append(u)
        y = _evaluate(e, u, _SAMPLES, sizes, shape, {} if shape is not None else None)
        if y is None or not np.isfinite(y).all():
            continue
        for name, f in _ACTIVATIONS.items():
            if np.allclose(y, f(_SAMPLES), rtol=1e-6, atol=1e-7):
                return name, u
    return None


ACC = "ACC__"  # the reduced value in a rendered epilogue; each template names its own tile


def render_epilogue(
    e: Expr,
    target: Expr,
    load_names: Callable[[Expr], str],
    params: Mapping[str, str],
    *,
    bind: Callable[[str], str] | None = None,
) -> str:
    """NKI source for the arithmetic `e` applies around its reduction `target` (`sum / cols`,
    `fmaxf(acc + bias[col], 0)`), with `ACC` where the reduced tile goes."""
    return render(with_placeholder(e, target, ACC), load_names, {**params, ACC: ACC}, bind=bind)


def with_placeholder(e: Expr, target: Expr, name: str) -> Expr:
    """`e` with the subtree `target` (a reduction, say) replaced by a parameter `name`, so an
    epilogue around it renders with a placeholder the template names (`params={name: ...}`)."""
    if e is target or e == target:
        return Expr(kind="param", name=name, text=name)
    return e.model_copy(update={"args": [with_placeholder(a, target, name) for a in e.args]})


class Untranslatable(ValueError):
    """A CUDA expression with no NKI rendering (the reason names the construct)."""


def render(
    e: Expr,
    load_names: Callable[[Expr], str],
    params: Mapping[str, str],
    *,
    float_casts: set[str] | None = None,
    activations: bool = True,
    fuse: bool = False,
    bind: Callable[[str], str] | None = None,
    scalar: Callable[[Expr], bool] | None = None,
    wide: Callable[[Expr], bool] | None = None,
    dtype: str | None = None,
) -> str:
    """NKI source for `e`; `load_names` names the tile holding each load, `params` renames.

    fuse: two arithmetic ops with scalar operands become one legacy `nisa.tensor_scalar`, and
    `(x op s) op y` one `nisa.scalar_tensor_tensor` (one Vector engine pass instead of two).
    bind: where the caller can emit statements before the expression, `bind(source)` assigns
    a value the expression needs twice to a local and returns its name (the maxNum select).
    scalar, wide: for fusion where tiles have other shapes than the output's (a row program):
    which leaves (loads, params) are one value per partition ([P, 1], a legal scalar operand)
    and which are whole tiles; an instruction's data and tensor operand must reach a whole
    tile, and anything neither (a [1, F] row vector) is not fused. dtype: the fused
    instructions' output type (the nl ops they replace compute in fp32 from mixed operands)."""
    casts = _FLOAT_CASTS | (float_casts or set())
    nan_reaches = _nan_reaches(e)

    def is_scalar(n: Expr) -> bool:
        if scalar is None:
            return _scalar_only(n)
        if n.kind == "const":
            return n.dtype != "bool"
        if n.kind in ("param", "load"):
            return scalar(n)
        if n.kind in ("binary", "unary", "cast", "call"):
            return bool(n.args) and all(is_scalar(x) for x in n.args)
        return False

    def is_wide(n: Expr) -> bool:
        if wide is None:
            return True
        if n.kind in ("param", "load"):
            return wide(n)
        return any(is_wide(x) for x in n.args)

    out_type = f", dtype={dtype}" if dtype else ""

    def clamp_select(n: Expr) -> bool | None:
        """For fmaxf/fminf against a constant: whether it renders as a select on the comparison
        (True) or as the plain nl.maximum/minimum (False); None for any other node.

        fmaxf/fminf return the non-NaN operand (IEEE maxNum): fmaxf(NaN, 0) is 0, which a
        NaN-propagating maximum would not give; a select on the comparison does, at the price
        of reading the operand twice. Without `bind` that means evaluating it twice, so only for
        an operand of at most one instruction (nested clamps would grow exponentially). Not
        needed when the operand is NaN only where a load is NaN whose NaN reaches the whole
        expression anyway (hardswish `v * fminf(fmaxf(v + 3, 0), 6)`): both maxima then give
        the same NaN result."""
        if n.kind != "call" or n.op not in _MAXNUM or len(n.args) != 2:
            return None
        if not any(a.kind == "const" for a in n.args):
            return None
        x = _clamp_operands(n)[0]
        if _nan_only_from(x) in nan_reaches:
            return False
        return bind is not None or go(x).count("nl.") <= 1

    def two_operand(n: Expr) -> tuple[str, Expr, Expr] | None:
        """(NKI op, left, right) of an op a Vector-engine scalar instruction can apply."""
        if n.kind == "binary" and n.op in _BINARY and len(n.args) == 2:
            return _BINARY[n.op], n.args[0], n.args[1]
        if clamp_select(n) is False:
            return MATH[n.op or ""], n.args[0], n.args[1]
        return None

    def one_scalar(t: Expr) -> tuple[str, Expr, Expr, bool] | None:
        """(op, tile operand, scalar operand, scalar on the left) of an op on one tile."""
        view = two_operand(t)
        if view is None:
            return None
        fn, x, y = view
        sx, sy = is_scalar(x), is_scalar(y)
        if sx == sy:
            return None
        tile, s = (y, x) if sx else (x, y)
        return (fn, tile, s, sx) if is_wide(tile) else None

    def fused(n: Expr) -> str | None:
        view = two_operand(n)
        if view is None:
            return None
        fn, a, b = view
        sa, sb = is_scalar(a), is_scalar(b)
        if sa and sb:
            return None
        if not sa and not sb:  # (data op0 scalar) op1 other
            for t, other, t_left in ((a, b, True), (b, a, False)):
                if not (t_left or fn not in _ORDERED) or not is_wide(other):
                    continue
                inner = one_scalar(t)
                if inner is None:
                    continue
                fn0, data, s, scalar_left = inner
                if scalar_left and fn0 in _ORDERED:
                    continue
                return (
                    f"nisa.scalar_tensor_tensor(data={go(data)}, op0={fn0}, "
                    f"operand0={go(s)}, op1={fn}, operand1={go(other)}{out_type})"
                )
            return None
        s1, t, s1_left = (a, b, True) if sa else (b, a, False)
        inner = one_scalar(t)
        if inner is None:
            return None
        fn0, data, s0, s0_left = inner
        # operand order only matters for - and /
        s0_left, s1_left = s0_left and fn0 in _ORDERED, s1_left and fn in _ORDERED
        return (f"nisa.tensor_scalar({go(data)}, op0={fn0}, operand0={go(s0)}, "
                f"reverse0={s0_left}, op1={fn}, operand1={go(s1)}, "
                f"reverse1={s1_left}{out_type})")  # fmt: skip

    done: dict[int, str] = {}  # per node: a subexpression the renders below reach many times
    # activations by structure: a lifted expression repeats its subtrees (BlackScholes' d1 in
    # every term of its polynomial), each a node of its own, recognised once
    shapes: dict[int, int] = {}  # id(node) -> its structure's number
    numbered: dict[tuple[Any, ...], int] = {}
    acts: dict[int, tuple[str, tuple[int, ...]] | None] = {}

    def shape(n: Expr) -> int:
        got = shapes.get(id(n))
        if got is None:
            key = (n.kind, n.op, n.name, n.value, n.dtype, tuple(i.canonical for i in n.index),
                   tuple(shape(a) for a in n.args))  # fmt: skip
            got = shapes[id(n)] = numbered.setdefault(key, len(numbered))
        return got

    def activation(n: Expr) -> tuple[str, Expr] | None:
        s = shape(n)
        if s in acts:
            hit = acts[s]
            return None if hit is None else (hit[0], _at_path(n, hit[1]))
        act = activation_of(n, shape)
        acts[s] = None if act is None else (act[0], _path_to(n, act[1]))
        return act

    def go(n: Expr) -> str:
        got = done.get(id(n))
        if got is None:
            got = done[id(n)] = _go(n)
        return got

    def _go(n: Expr) -> str:
        k = n.kind
        act = activation(n) if activations else None
        if act is not None:
            return f"{act[0]}({_strip_outer(go(act[1]))})"
        if fuse and k in ("binary", "call"):
            f = fused(n)
            if f is not None:
                return f
        if k == "const":
            if n.dtype == "bool":
                return "True" if n.value else "False"
            return _float_text(float(n.value)) if n.dtype in ("float", "double") else str(n.value)
        if k == "param":
            if n.name not in params:
                raise Untranslatable(f"parameter {n.name} has no value in the NKI kernel")
            return params[n.name]  # type: ignore[index]
        if k == "load":
            return load_names(n)
        if k == "binary":
            a, b = (go(x) for x in n.args)
            if n.op in _SCALAR_OPS and all(_scalar_only(x) for x in n.args):
                # no tile operand (`1.0f - beta1`): Python arithmetic on the kernel's scalars,
                # as nl ops need a tile; "/" stays out: C truncates int / int, Python does not
                return f"({a} {n.op} {b})"
            if n.op in _BINARY:
                return f"{_BINARY[n.op]}({a}, {b})"
            if n.op in _COMPARE:
                return f"{_COMPARE[n.op]}({a}, {b})"
            raise Untranslatable(f"operator {n.op} in {n.text!r}")
        if k == "unary":
            (a,) = (go(x) for x in n.args)
            if n.op == "-":
                return f"(-{a})"
            raise Untranslatable(f"unary {n.op} in {n.text!r}")
        if k == "cast":
            if n.op in casts:
                return go(n.args[0])  # engines compute in fp32; the store casts to the dtype
            raise Untranslatable(f"cast to {n.op} in {n.text!r}")
        if k == "call":
            if n.op in CONVERSIONS and len(n.args) == 1:
                return go(n.args[0])
            bits = _bit_pattern(n)
            if bits is not None:
                return _float_text(bits)
            if clamp_select(n):
                x, c = _clamp_operands(n)
                a, b = go(x), go(c)
                if bind is not None and "nl." in a:
                    a = bind(a)  # computed once, read twice
                return f"nl.where({_MAXNUM[n.op or '']}({a}, {b}), {a}, {b})"
            if n.op in FMA and len(n.args) == 3:  # fmaf(a, b, c): a*b + c on the fp32 engines
                a, b, c = (go(x) for x in n.args)
                return f"nl.add(nl.multiply({a}, {b}), {c})"
            fn = MATH.get(n.op or "")
            if fn is None:
                raise Untranslatable(f"call to {n.op}() in {n.text!r}")
            return f"{fn}({', '.join(go(x) for x in n.args)})"
        if k == "select":
            c, a, b = (go(x) for x in n.args)
            return f"nl.where({c}, {a}, {b})"
        raise Untranslatable(f"{k} expression {n.text!r} ({n.op})")

    return _strip_outer(go(e))


def _path_to(e: Expr, target: Expr) -> tuple[int, ...]:
    """The argument positions that lead from `e` to the node `target` (by identity)."""
    stack: list[tuple[Expr, tuple[int, ...]]] = [(e, ())]
    while stack:
        n, path = stack.pop()
        if n is target:
            return path
        stack.extend((a, (*path, k)) for k, a in enumerate(n.args))
    raise ValueError("the node is not within the expression")


def _at_path(e: Expr, path: tuple[int, ...]) -> Expr:
    for k in path:
        e = e.args[k]
    return e


def _bit_pattern(n: Expr) -> float | None:
    """`__int_as_float(0x7f800000)` (how <math.h> spells INFINITY): the float a constant's bits
    make; None for anything else."""
    if n.op not in ("__int_as_float", "__uint_as_float") or len(n.args) != 1:
        return None
    (a,) = n.args
    if a.kind != "const" or a.dtype in ("float", "double", "bool"):
        return None
    return float(np.array([int(a.value) & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0])


def _float_text(f: float) -> str:
    """A float as Python source: inf and nan have no literal."""
    if f != f:
        return 'float("nan")'
    if f in (float("inf"), float("-inf")):
        return 'float("-inf")' if f < 0 else 'float("inf")'
    return repr(f)


def _strip_outer(s: str) -> str:
    if not (s.startswith("(") and s.endswith(")")):
        return s
    depth = 0
    for i, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i < len(s) - 1:
            return s
    return s[1:-1]
