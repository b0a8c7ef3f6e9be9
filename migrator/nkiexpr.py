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
# C's fmax/fmin against a constant: keep x where this comparison with the constant holds
_MAXNUM = {"fmaxf": "nl.greater", "fmax": "nl.greater", "fminf": "nl.less", "fmin": "nl.less"}


def _scalar_only(n: Expr) -> bool:
    """True when `n` reads no memory: constants and scalar parameters combined."""
    if n.kind in ("const", "param"):
        return True
    if n.kind in ("binary", "unary", "cast"):
        return all(_scalar_only(x) for x in n.args)
    return False


class Untranslatable(ValueError):
    """A CUDA expression with no NKI rendering (the reason names the construct)."""


def render(
    e: Expr,
    load_names: Callable[[Expr], str],
    params: Mapping[str, str],
    *,
    float_casts: set[str] | None = None,
) -> str:
    """NKI source for `e`; `load_names` names the tile holding each load, `params` renames."""
    casts = _FLOAT_CASTS | (float_casts or set())

    def go(n: Expr) -> str:
        k = n.kind
        if k == "const":
            if n.dtype == "bool":
                return "True" if n.value else "False"
            return repr(float(n.value)) if n.dtype in ("float", "double") else str(n.value)
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
            if n.op in _MAXNUM and len(n.args) == 2 and any(a.kind == "const" for a in n.args):
                # fmaxf/fminf return the non-NaN operand (IEEE maxNum): fmaxf(NaN, 0) is 0,
                # which a NaN-propagating maximum would not give; a select on the comparison
                # does, at the price of evaluating the operand twice, so only for an operand of
                # at most one instruction (nested clamps would otherwise grow exponentially)
                x, c = n.args if n.args[1].kind == "const" else n.args[::-1]
                a, b = go(x), go(c)
                if a.count("nl.") <= 1:
                    return f"nl.where({_MAXNUM[n.op]}({a}, {b}), {a}, {b})"
            fn = MATH.get(n.op or "")
            if fn is None:
                raise Untranslatable(f"call to {n.op}() in {n.text!r}")
            return f"{fn}({', '.join(go(x) for x in n.args)})"
        if k == "select":
            c, a, b = (go(x) for x in n.args)
            return f"nl.where({c}, {a}, {b})"
        raise Untranslatable(f"{k} expression {n.text!r} ({n.op})")

    return _strip_outer(go(e))


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
