"""Logical 2-D views of flat tensors, read off a lifted program.

A kernel that splits a flat index (`row = idx / cols; col = idx % cols`) is lifted over flat
tensors: `y[i] = x[(i // M) + N*(i % M)]`. Its spec (inferred from a 1-D launch) says only
`x[M * N]`, so the NKI kernel could not even read M. The div/mod structure of the program says
what the tensors are: the output splits as `y[p, q]` with `i = p*M + q`, and then `x` is read at
`q*N + p`, a row-major `[M, N]` tensor read at `[q, p]`. `with_views` rewrites the program and
the spec's shapes accordingly (the memory is the same: a logical shape is a view); the caller
verifies the rewritten program against the interpreter before trusting it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping

from migrator.contract import TaskSpec
from migrator.lift.program import (
    Assign,
    Expr,
    IndexMap,
    Number,
    Program,
    Term,
    index_maps,
    index_terms,
)


def with_views(program: Program, spec: TaskSpec) -> tuple[Program, TaskSpec] | None:
    """`program` and `spec` with flat tensors seen as `[rows, cols]` where the program's index
    arithmetic shows the split, or as the N-D tensors of a permutation of axes; None when it
    shows neither (or not consistently)."""
    permuted = _permuted(program, spec)
    if permuted is not None:
        return permuted
    named = _named_literals(program, spec)
    shapes = {t.name: [_name_factors(str(d), named) for d in t.shape] for t in spec.tensors}
    new_shapes: dict[str, list[str]] = {}
    assigns: list[Assign] = []
    for a in program.assigns:
        split = _output_split(a, shapes)
        sub: dict[str, tuple[str, str, str]] = {}
        out_vars = list(a.vars)
        if split is not None:
            (p, q), cols, rows = split
            new_shapes[a.tensor] = [rows, cols]
            sub = {a.vars[0]: (p, q, cols)}
            out_vars = [p, q]
        body = _rewrite(a.expr, sub, shapes, new_shapes)
        if body is None:
            return None
        assigns.append(Assign(tensor=a.tensor, vars=out_vars, expr=body))
    if not new_shapes:
        return None
    tensors = [t.model_copy(update={"shape": new_shapes[t.name]}) if t.name in new_shapes else t
               for t in spec.tensors]  # fmt: skip
    return Program(assigns=assigns), spec.model_copy(update={"tensors": tensors})


def _named_literals(program: Program, spec: TaskSpec) -> dict[str, str]:
    """Literal shape factors the program names as a size (a shape `256 * V` where the kernel
    strides by `emb_size`, which is 256 in every size set): literal -> size name."""
    text = program.render()
    sets = spec.all_size_sets()
    out: dict[str, str] = {}
    for name in spec.sizes:
        values = {s.get(name) for s in sets}
        if len(values) == 1 and re.search(rf"\b{re.escape(name)}\b", text):
            v = str(values.pop())
            out[v] = name if v not in out else ""  # two names for one literal: neither
    return {v: n for v, n in out.items() if n}


def _name_factors(dim: str, named: Mapping[str, str]) -> str:
    parts = [f.strip() for f in dim.split("*")]
    if len(parts) < 2 or not named:
        return dim
    return " * ".join(named.get(f, f) for f in parts)


def _factors(shape: list[str]) -> list[str] | None:
    """`["M * N"]` -> ["M", "N"]: a flat shape that is a plain product of names or numbers."""
    parts = _names(shape[0]) if len(shape) == 1 else None
    return parts if parts is not None and len(parts) >= 2 else None


def _without(factors: list[str], d: Number) -> str | None:
    """The product of `factors` with one factor `d` taken out (None if `d` is not one)."""
    rest = list(factors)
    if str(d) not in rest:
        return None
    rest.remove(str(d))
    return " * ".join(rest)


def _output_split(a: Assign, shapes: Mapping[str, list[str]]) -> tuple[tuple[str, str], str,
                                                                       str] | None:  # fmt: skip
    """(new coordinate names, cols, rows) when the flat output's coordinate is only ever taken
    `// D` and `% D` for one D that is a factor of its shape."""
    factors = _factors(shapes.get(a.tensor, []))
    if factors is None or len(a.vars) != 1:
        return None
    var = a.vars[0]
    # (coordinates compared by a mask and ranges that follow the element count as reads)
    divisors = {t.div if t.div is not None else t.mod for m in index_maps(a.expr)
                for t in index_terms(m)
                if t.var == var and (t.div is not None or t.mod is not None)}  # fmt: skip
    # one factor D, every other divisor a product with D in it (`i % (C * T)`: the position of
    # row `i // C` within its block of T rows)
    single = [d for d in divisors if len(_names(d) or []) == 1]
    if len(single) != 1 or not all(_cofactor(x, single[0]) is not None for x in divisors
                                    if x != single[0]):  # fmt: skip
        return None
    d = single[0]
    rows = _without(factors, d) if d is not None else None
    if rows is None:
        return None
    taken = {e.var for e in a.expr.walk() if e.kind == "reduce"}
    free = [n for n in ("i", "j", "p", "q", "u", "v", "m", "n") if n not in taken]
    return (free[0], free[1]), str(d), rows


def _mul(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    return f"{a} * {b}"


def _rewrite(e: Expr, sub: dict[str, tuple[str, str, str]], shapes: Mapping[str, list[str]],
             new_shapes: dict[str, list[str]]) -> Expr | None:  # fmt: skip
    """`e` with the split output coordinate replaced by (p, q) and flat loads read as 2-D."""
    if e.kind == "load":
        index = [_substitute(m, sub) for m in e.index]
        if any(m is None for m in index):
            return None
        got: list[IndexMap] = [m for m in index if m is not None]
        name = e.tensor or ""
        factors = _factors(shapes.get(name, []))
        if factors is not None and len(got) == 1:
            split = _split_load(got[0], factors)
            if split is None:
                return None
            shape, got = split
            if new_shapes.setdefault(name, shape) != shape:
                return None  # read as two different views
        return e.model_copy(update={"index": got})
    if e.kind == "coord":
        index = [_substitute(m, sub) for m in e.index]
        return None if any(m is None for m in index) else e.model_copy(update={"index": index})
    upto = e.upto
    if upto is not None:
        upto = _substitute(upto, sub)
        if upto is None:
            return None
    args = []
    for x in e.args:
        y = _rewrite(x, sub, shapes, new_shapes)
        if y is None:
            return None
        args.append(y)
    return e.model_copy(update={"args": args, "upto": upto})


def _substitute(m: IndexMap, sub: dict[str, tuple[str, str, str]]) -> IndexMap | None:
    """`i // D` -> p, `i % D` -> q, `c*i` -> `c*D*p + c*q` (i = p*D + q, 0 <= q < D);
    `i // (D*X)` -> `p // X`, `i % (D*X)` -> `D*(p % X) + q`; a gather's index likewise."""
    terms: list[Term] = []
    for t in m.terms:
        if t.var not in sub:
            terms.append(t)
            continue
        p, q, d = sub[t.var]
        div, mod = t.div, t.mod
        if div is not None and mod is None:
            x = _cofactor(div, d)
            if x is None:
                return None
            terms.append(Term(coef=t.coef, var=p, div=x if x != 1 else None))
        elif mod is not None and div is None:
            x = _cofactor(mod, d)
            if x is None:
                return None
            if x == 1:
                terms.append(Term(coef=t.coef, var=q))
            else:
                terms += [Term(coef=_mul(t.coef, d), var=p, mod=x), Term(coef=t.coef, var=q)]
        elif div is None and mod is None:
            terms += [Term(coef=_mul(t.coef, d), var=p), Term(coef=t.coef, var=q)]
        else:  # `(i // (D*X)) % M` = `(p // X) % M`
            x = _cofactor(div, d)
            if x is None:
                return None
            terms.append(Term(coef=t.coef, var=p, div=x if x != 1 else None, mod=mod))
    gather = m.gather
    if gather is not None:
        index = [_substitute(g, sub) for g in gather.index]
        if any(g is None for g in index):
            return None
        gather = gather.model_copy(update={"index": index})
    return IndexMap(terms=terms, const=m.const, gather=gather)


def _names(d: Number | None) -> list[str] | None:
    """The factors of a product of names or numbers (`C * T` -> [C, T]), or None."""
    if d is None:
        return None
    parts = [f.strip() for f in str(d).split("*")]
    return parts if all(re.fullmatch(r"\w+", f) for f in parts) else None


def _cofactor(x: Number, d: str) -> Number | None:
    """`x / d` where `x` is `d` times a product of names (1 where `x` is `d`), else None."""
    parts = _names(x)
    if parts is None or d not in parts:
        return None
    parts.remove(d)
    if not parts:
        return 1
    return " * ".join(parts)


def _split_load(m: IndexMap, factors: list[str]) -> tuple[list[str], list[IndexMap]] | None:
    """A flat index `S*a + b` (unit-stride terms b, stride-S terms a, S a factor of the tensor's
    shape) as the 2-D index `[a, b]` of a `[rest, S]` view."""
    if m.const != 0:
        return None
    unit = [t for t in m.terms if t.coef == 1 and t.div is None and t.mod is None]
    strided = [t for t in m.terms if t not in unit]
    strides = {str(t.coef) for t in strided}
    g = m.gather
    if g is not None and g.coef == 1 and not unit and strided:
        # `V*i + labels[i]`: element labels[i] of row i of an [R, V] table
        s = strides.pop() if len(strides) == 1 else None
        rows = _without(factors, s) if s is not None else None
        if rows is None or any(t.div or t.mod for t in strided):
            return None
        row = IndexMap(terms=[Term(coef=1, var=t.var) for t in strided])
        return [rows, s], [row, IndexMap(gather=g)]
    if g is not None:  # `C*ids[i] + j`: row ids[i] of a [V, C] table
        strides.add(str(g.coef))
    if len(strides) != 1 or not unit:
        return None
    s = strides.pop()
    rows = _without(factors, s)
    if rows is None:
        return None
    gather = m.gather.model_copy(update={"coef": 1}) if m.gather is not None else None
    row = IndexMap(terms=[Term(coef=1, var=t.var, div=t.div, mod=t.mod) for t in strided],
                   gather=gather)  # fmt: skip
    return [rows, s], [row, IndexMap(terms=unit)]


# --- permutations of axes --------------------------------------------------------------------
# `q[i] = inp[(i % d) + 3*NH*d*((i // d) % T) + d*((i // (T*d)) % NH) + 3*NH*T*d*(i // (NH*T*d))]`
# splits i in the mixed radix [B, NH, T, d] and reads inp as [B, T, 3, NH, d]: a copy with its
# axes permuted, `q[b, h, t, e] = inp[b, t, 0, h, e]`. Sizes are products of factors here
# (`Counter`s of names and numbers), so strides divide symbolically.
Factors = Counter[str]


def _product(x: Number | None) -> Factors | None:
    """`3 * NH * d` -> {3, NH, d}; 1 -> {}; None if `x` is not a product of names/numbers."""
    if x is None:
        return None
    text = str(x).replace("(", " ").replace(")", " ")
    parts = [f.strip() for f in text.split("*")]
    if not all(re.fullmatch(r"\w+", f) for f in parts) or any(f in ("0",) for f in parts):
        return None
    return Counter(f for f in parts if f != "1")


def _over(a: Factors, b: Factors) -> Factors | None:
    """`a / b` when b's factors are among a's, else None."""
    return None if any(a[f] < n for f, n in b.items()) else a - b


def _text(c: Factors) -> Number:
    """A product back as a number or a size expression (numbers first)."""
    if not c:
        return 1
    nums = [f for f in c.elements() if f.isdigit()]
    names = sorted(f for f in c.elements() if not f.isdigit())
    lit = math.prod(int(f) for f in nums)
    if not names:
        return lit
    return " * ".join(([str(lit)] if lit != 1 else []) + names)


def _digits(m: IndexMap, var: str, out: Factors) -> list[tuple[Factors, Factors]] | None:
    """(input stride, radix) per digit of `var` in a mixed radix, innermost first, the last the
    top digit (its radix what the output's shape leaves); None unless every term is one."""
    if m.gather is not None or any(t.var != var for t in m.terms):
        return None
    terms = sorted(m.terms, key=lambda t: len(_product(t.div or 1) or ()) if t.div else -1)
    inner: Factors = Counter()
    out_digits: list[tuple[Factors, Factors]] = []
    for n, t in enumerate(terms):
        div = _product(t.div) if t.div is not None else Counter()
        coef = _product(t.coef)
        if div != inner or coef is None:
            return None
        if t.mod is None:  # the top digit: last
            rest = _over(out, inner)
            if n != len(terms) - 1 or rest is None or not rest:
                return None
            out_digits.append((coef, rest))
            return out_digits if len(out_digits) >= 3 else None
        radix = _product(t.mod)
        if radix is None or not radix:
            return None
        out_digits.append((coef, radix))
        inner = inner + radix
    return None


def _permuted(program: Program, spec: TaskSpec) -> tuple[Program, TaskSpec] | None:
    """Each output a copy of a flat input with its axes permuted (see above), as N-D tensors."""
    shapes = {t.name: t.shape for t in spec.tensors}
    new_shapes: dict[str, list[Number]] = {}
    assigns: list[Assign] = []
    for a in program.assigns:
        e = a.expr
        out_shape = shapes.get(a.tensor, [])
        if e.kind != "load" or len(a.vars) != 1 or len(e.index) != 1 or len(out_shape) != 1:
            return None
        in_shape = shapes.get(e.tensor or "", [])
        out, total = _product(out_shape[0]), _product(in_shape[0]) if len(in_shape) == 1 else None
        digits = _digits(e.index[0], a.vars[0], out) if out is not None else None
        if digits is None or total is None:
            return None
        const = _product(e.index[0].const) if e.index[0].const != 0 else Counter()
        if const is None:
            return None
        by_digit = [f"i{len(digits) - 1 - n}" for n in range(len(digits))]  # i0 outermost
        names = by_digit[::-1]
        view = _input_view(digits, by_digit, total, const, spec)
        if view is None:
            return None
        dims, index = view
        out_dims = [_text(r) for _, r in reversed(digits)]
        if new_shapes.setdefault(a.tensor, out_dims) != out_dims:
            return None
        if new_shapes.setdefault(e.tensor or "", dims) != dims:
            return None  # read as two different views
        load = e.model_copy(update={"index": index})
        assigns.append(Assign(tensor=a.tensor, vars=names, expr=load))
    if not assigns:
        return None
    tensors = [t.model_copy(update={"shape": new_shapes[t.name]}) if t.name in new_shapes else t
               for t in spec.tensors]  # fmt: skip
    return Program(assigns=assigns), spec.model_copy(update={"tensors": tensors})


def _input_view(
    digits: list[tuple[Factors, Factors]],
    names: list[str],
    total: Factors,
    const: Factors,
    spec: TaskSpec,
) -> tuple[list[Number], list[IndexMap]] | None:
    """The input's N-D shape (its strides' ratios, each digit's radix an axis of its own, the
    factors left over axes indexed by the constant offset) and the index of the load there."""
    sets = spec.all_size_sets()

    def value(c: Factors, s: Mapping[str, int]) -> int:
        return math.prod(int(f) if f.isdigit() else s[f] for f in c.elements())

    try:
        order = sorted(range(len(digits)), key=lambda n: -value(digits[n][0], sets[0]))
    except KeyError:
        return None
    dims: list[Number] = []
    index: list[IndexMap] = []
    left: Factors | None = const if const else None
    prev = total

    def rest_axis(rest: Factors, stride: Factors) -> bool:
        nonlocal left
        at = _over(left, stride) if left is not None else None
        if at is not None and _over(rest, Counter()) is not None:
            if not all(value(at, s) < value(rest, s) for s in sets):
                return False
            dims.append(_text(rest))
            index.append(IndexMap(const=_text(at)))
            left = None
            return True
        dims.append(_text(rest))
        index.append(IndexMap(const=0))
        return True

    for n in order:
        stride, radix = digits[n]
        ratio = _over(prev, stride)
        rest = _over(ratio, radix) if ratio is not None else None
        if rest is None:
            return None
        if rest and not rest_axis(rest, stride + radix):
            return None
        dims.append(_text(radix))
        index.append(IndexMap(terms=[Term(coef=1, var=names[n])]))
        prev = stride
    if prev and not rest_axis(prev, Counter()):
        return None
    if left is not None:
        return None  # an offset no axis of the view holds
    return dims, index
