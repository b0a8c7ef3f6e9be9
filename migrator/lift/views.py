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

import ast
import re
from collections.abc import Mapping
from fractions import Fraction

from migrator.contract import TaskSpec
from migrator.contract import eval_expr as spec_eval
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
    """The first of `view_candidates`, or None."""
    got = view_candidates(program, spec)
    return got[0] if got else None


def view_candidates(program: Program, spec: TaskSpec) -> list[tuple[Program, TaskSpec]]:
    """`program` and `spec` with flat tensors seen as `[rows, cols]` where the program's index
    arithmetic shows the split, then as the N-D tensors of its mixed radix (`_nd_views`): each
    way it shows (a causal softmax over `[B * NH * T, T]` rows is both), in that order."""
    out = [v for v in (_two_d_views(program, spec), _nd_views(program, spec),
                       _row_views(program, spec), _segment_views(program, spec))
           if v is not None]  # fmt: skip
    return out


def _two_d_views(program: Program, spec: TaskSpec) -> tuple[Program, TaskSpec] | None:
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
    if any(len(x.index) != len(new_shapes[x.tensor]) for a in assigns for x in a.expr.walk()
           if x.kind == "load" and x.tensor in new_shapes):  # fmt: skip
        return None  # a tensor read both flat and as rows
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
            m = got[0]
            if (
                split is None
                and m.gather is None
                and m.const == 0
                and all(t.coef == 1 and t.div is None and t.mod is None for t in m.terms)
            ):
                return e.model_copy(update={"index": got})  # one per row (`dlosses[p]`): 1-D
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


# --- N-D views of mixed-radix programs ---------------------------------------------------------
# `q[i] = inp[(i % d) + 3*NH*d*((i // d) % T) + d*((i // (T*d)) % NH) + 3*NH*T*d*(i // (NH*T*d))]`
# splits i in the mixed radix [B, NH, T, d] and reads inp as [B, T, 3, NH, d]: a copy with its
# axes permuted, `q[b, h, t, e] = inp[b, t, 0, h, e]`; attention's scores over a packed QKV
# tensor split i the same way and read two rows of it. Sizes here are products and quotients of
# factors (`Powers`: factor -> exponent), so strides divide symbolically (`3 * C / (C / NH)`).
Powers = dict[str, int]


def _powers(x: Number | None) -> Powers | None:
    """`3 * NH * d` -> {3: 1, NH: 1, d: 1}; `C / NH` -> {C: 1, NH: -1}; 1 -> {}; None for
    anything but products and quotients of names and positive integers."""
    if x is None or isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        if not float(x).is_integer() or x < 1:
            return None
        return {} if int(x) == 1 else {str(int(x)): 1}
    try:
        tree = ast.parse(str(x), mode="eval").body
    except SyntaxError:
        return None
    out: dict[str, int] = {}

    def walk(n: ast.expr, sign: int) -> bool:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            return walk(n.left, sign) and walk(n.right, sign)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv)):
            return walk(n.left, sign) and walk(n.right, -sign)
        if isinstance(n, ast.Name):
            out[n.id] = out.get(n.id, 0) + sign
            return True
        if isinstance(n, ast.Constant) and type(n.value) is int and n.value >= 1:
            if n.value > 1:
                out[str(n.value)] = out.get(str(n.value), 0) + sign
            return True
        return False

    return {f: e for f, e in out.items() if e} if walk(tree, 1) else None


def _times(a: Powers, b: Powers, sign: int = 1) -> Powers:
    out = dict(a)
    for f, e in b.items():
        out[f] = out.get(f, 0) + sign * e
    return {f: e for f, e in out.items() if e}


def _value(c: Powers, sizes: Mapping[str, int]) -> Fraction:
    v = Fraction(1)
    for f, e in c.items():
        v *= Fraction(int(f) if f.isdigit() else sizes[f]) ** e
    return v


def _whole(c: Powers, sets: list[dict[str, int]]) -> bool:
    """A positive integer at every size set."""
    try:
        return all((v := _value(c, s)).denominator == 1 and v >= 1 for s in sets)
    except (KeyError, ZeroDivisionError):
        return False


def _render(c: Powers) -> Number:
    """Powers back as a number or a size expression (`3 * C`, `C / NH`, `C / (NH * T)`)."""

    def side(sign: int) -> tuple[int, list[str]]:
        lit, names = 1, []
        for f, e in sorted(c.items()):
            if e * sign > 0:
                if f.isdigit():
                    lit *= int(f) ** abs(e)
                else:
                    names += [f] * abs(e)
        return lit, names

    (nl_, nn), (dl, dn) = side(1), side(-1)
    num = " * ".join(([str(nl_)] if nl_ != 1 or not nn else []) + nn)
    if dl == 1 and not dn:
        return int(num) if num.isdigit() else num
    den = " * ".join(([str(dl)] if dl != 1 else []) + dn)
    den = f"({den})" if " " in den else den
    num = f"({num})" if " " in num and "*" not in num else num
    return f"{num} / {den}"


def _chain(
    a: Assign, out: Powers, sets: list[dict[str, int]]
) -> tuple[list[Powers], dict[tuple[str, str], list[tuple[int, Powers]]]] | None:
    """The mixed radix of the flat output coordinate: its digits' extents, innermost first (the
    levels its uses divide it by: `i % d`, `(i // d) % T`, `i // (NH * T * d)`, or `i // T`
    beside `i // (T * T)`), and each use as digits times multipliers; None unless every use is
    such, with two digits or more (`_nd_views` asks one output for three)."""
    var = a.vars[0]
    forms: set[tuple[str, str]] = set()
    for m in index_maps(a.expr):
        for t in index_terms(m):
            if t.var == var:
                forms.add((str(t.div) if t.div is not None else "",
                           str(t.mod) if t.mod is not None else ""))  # fmt: skip
    levels: dict[str, Powers] = {_key({}): {}}
    for div, mod in forms:
        d = _powers(div) if div else {}
        r = _powers(mod) if mod else {}
        if d is None or r is None:
            return None
        levels[_key(d)] = d
        if mod:
            levels[_key(_times(d, r))] = _times(d, r)
    try:
        order = sorted(levels.values(), key=lambda c: _value(c, sets[0]))
    except (KeyError, ZeroDivisionError):
        return None
    radices = [_times(b, a_, -1) for a_, b in zip(order, order[1:], strict=False)]
    top = _times(out, order[-1], -1)
    if top:
        radices.append(top)
    if len(radices) < 2 or not all(_whole(r, sets) for r in radices):
        return None
    at = {_key(c): k for k, c in enumerate(order)}
    uses: dict[tuple[str, str], list[tuple[int, Powers]]] = {}
    for div, mod in forms:
        d = _powers(div) if div else {}
        first = at[_key(d or {})]
        last = at[_key(_times(d or {}, _powers(mod) or {}))] if mod else len(radices)
        mult: Powers = {}
        digits = []
        for k in range(first, last):
            digits.append((k, mult))
            mult = _times(mult, radices[k])
        uses[(div, mod)] = digits
    return radices, uses


def _key(c: Powers | None) -> str:
    return "" if not c else repr(sorted(c.items()))


def _resplit(
    e: Expr, var: str, names: list[str], uses: Mapping[tuple[str, str], list[tuple[int, Powers]]]
) -> Expr | None:
    """`e` with each use of `var` written in its digits (`names[k]` digit k, innermost first)."""

    def index(m: IndexMap) -> IndexMap | None:
        terms = []
        for t in m.terms:
            if t.var != var:
                terms.append(t)
                continue
            form = (str(t.div) if t.div is not None else "",
                    str(t.mod) if t.mod is not None else "")  # fmt: skip
            coef = _powers(t.coef)  # (None for a negative stride: digits then not spread)
            if form not in uses:
                return None
            for k, mult in uses[form]:
                if mult and coef is None:
                    return None
                c = t.coef if not mult else _render(_times(coef or {}, mult))
                terms.append(Term(coef=c, var=names[k]))
        gather = m.gather
        if gather is not None:
            g = [index(x) for x in gather.index]
            if any(x is None for x in g):
                return None
            gather = gather.model_copy(update={"index": g})
        return m.model_copy(update={"terms": terms, "gather": gather})

    maps = [index(m) for m in e.index]
    upto = index(e.upto) if e.upto is not None else None
    args = [_resplit(x, var, names, uses) for x in e.args]
    if any(m is None for m in maps) or (e.upto is not None and upto is None) or None in args:
        return None
    return e.model_copy(update={"index": maps, "upto": upto, "args": args})


def _extents(e: Expr, out: Mapping[str, Powers]) -> dict[str, Powers | None]:
    """Each coordinate's extent: the output's digits, each reduction's (None where the range
    follows the element: a causal sum)."""
    got: dict[str, Powers | None] = dict(out)
    for x in e.walk():
        if x.kind == "reduce" and x.var:
            got[x.var] = _powers(x.extent) if x.upto is None and x.extent is not None else None
    return got


def _view(
    m: IndexMap,
    total: Powers,
    extents: Mapping[str, Powers | None],
    sets: list[dict[str, int]],
) -> tuple[list[Number], list[IndexMap]] | None:
    """A flat load's N-D shape (the ratios of its strides; each coordinate's extent an axis of
    its own, factors left over axes indexed by the constant offset) and its index there."""
    if m.gather is not None:
        return None
    strides: dict[str, Powers] = {}
    for t in m.terms:
        c = _powers(t.coef)
        if t.div is not None or t.mod is not None or c is None or t.var in strides:
            return None
        strides[t.var] = c
    const = _powers(m.const) if m.const != 0 else {}
    if const is None:
        return None
    try:
        order = sorted(strides, key=lambda v: -_value(strides[v], sets[0]))
    except (KeyError, ZeroDivisionError):
        return None
    dims: list[Number] = []
    index: list[IndexMap] = []
    left: Powers | None = const or None

    def rest_axis(rest: Powers, stride: Powers) -> bool:
        nonlocal left
        if not _whole(rest, sets):
            return False
        at = _times(left, stride, -1) if left is not None else None
        if at is not None and all(
            (v := _value(at, s)).denominator == 1 and 0 <= v < _value(rest, s) for s in sets
        ):
            index.append(IndexMap(const=_render(at)))
            left = None
        else:
            index.append(IndexMap(const=0))
        dims.append(_render(rest))
        return True

    prev = total
    for v in order:
        ratio = _times(prev, strides[v], -1)
        radix = extents.get(v) or ratio
        rest = _times(ratio, radix, -1)
        if not _whole(ratio, sets) or not _whole(radix, sets):
            return None
        if rest and not rest_axis(rest, _times(strides[v], radix)):
            return None
        dims.append(_render(radix))
        index.append(IndexMap(terms=[Term(coef=1, var=v)]))
        prev = strides[v]
    if prev and not rest_axis(prev, {}):
        return None
    if left is not None:
        return None  # an offset no axis of the view holds
    return dims, index


def _nd_views(program: Program, spec: TaskSpec) -> tuple[Program, TaskSpec] | None:
    """Each flat output split in its mixed radix, each flat input it reads seen as the N-D
    tensor its strides show (see above)."""
    shapes = {t.name: t.shape for t in spec.tensors}
    sets = spec.all_size_sets()
    new_shapes: dict[str, list[Number]] = {}
    assigns: list[Assign] = []

    def flat(name: str | None) -> Powers | None:
        shape = shapes.get(name or "", [])
        return _powers(shape[0]) if len(shape) == 1 else None

    for a in program.assigns:
        out = flat(a.tensor)
        own = shapes.get(a.tensor, [])
        if out is None and len(a.vars) == len(own) > 1:
            # an output N-D already (`o[b, t, d]`): its axes are the digits; only the flat
            # tensors it reads (`k[(T * D) * b + D * t + d]`) take views
            dims = [_powers(d) for d in own]
            if any(d is None for d in dims):
                return None
            digits = dict(zip(a.vars, dims, strict=True))  # type: ignore[arg-type]
            body = a.expr
        else:
            got = _chain(a, out, sets) if out is not None and len(a.vars) == 1 else None
            if got is None:
                return None
            radices, uses = got
            names = [f"i{len(radices) - 1 - k}" for k in range(len(radices))]  # i0 outermost
            resplit = _resplit(a.expr, a.vars[0], names, uses)
            if resplit is None:
                return None
            body = resplit
            digits = {n: r for n, r in zip(reversed(names), reversed(radices), strict=True)}
        extents = _extents(body, digits)
        failed = False

        def reshaped(e: Expr, extents: dict[str, Powers | None] = extents) -> Expr:
            nonlocal failed
            if e.kind == "load" and len(e.index) == 1 and (total := flat(e.tensor)) is not None:
                view = _view(e.index[0], total, extents, sets)
                if view is None or new_shapes.setdefault(e.tensor or "", view[0]) != view[0]:
                    failed = True  # (read as two different views, or as none)
                    return e
                return e.model_copy(update={"index": view[1]})
            return e.model_copy(update={"args": [reshaped(x) for x in e.args]})

        body = reshaped(body)
        out_dims = [_render(d) for d in digits.values()]
        if failed or new_shapes.setdefault(a.tensor, out_dims) != out_dims:
            return None
        assigns.append(Assign(tensor=a.tensor, vars=list(digits), expr=body))
    if not assigns or max(len(a.vars) for a in assigns) < 3:
        return None  # (2-D views are `_two_d_views`')
    tensors = [t.model_copy(update={"shape": new_shapes[t.name]}) if t.name in new_shapes else t
               for t in spec.tensors]  # fmt: skip
    return Program(assigns=assigns), spec.model_copy(update={"tensors": tensors})


def _row_views(program: Program, spec: TaskSpec) -> tuple[Program, TaskSpec] | None:
    """An N-D output (N > 2) seen as its `[rows, last axis]` view, rows the product of the
    leading axes: `dx[i, j, l]` over `[B * NH, T, T]` as `dx[r, l]` over `[B * NH * T, T]`.
    Tensors laid out like it (read at the element's leading coordinates) and flat ones read at
    the same row-major offsets take the same view; a coordinate of the axis next to the last,
    where a range ends (`sum_{k < j + 1}`), is the row taken modulo that axis. None where any
    read or range is not of those forms."""
    if len(program.assigns) != 1 or len(program.assigns[0].vars) < 3:
        return None
    a = program.assigns[0]
    out_t = spec.tensor_named(a.tensor)
    if len(out_t.shape) != len(a.vars):
        return None
    sets = spec.all_size_sets()
    dims = [str(d) for d in out_t.shape]
    lead, last = a.vars[:-1], a.vars[-1]
    rows = " * ".join(f"({d})" if not re.fullmatch(r"\w+", d) else d for d in dims[:-1])
    strides = [" * ".join(dims[k + 1 :]) for k in range(len(dims) - 1)]

    def same(x: Number, y: str) -> bool:
        return _equal_at(x, y, sets)

    def column(m: IndexMap) -> IndexMap | None:  # no leading coordinate: the row is fixed
        if m.gather is not None or any(t.var in lead for t in m.terms):
            return None
        terms = [t.model_copy(update={"var": "j"}) if t.var == last else t for t in m.terms]
        return m.model_copy(update={"terms": terms})

    def bound(m: IndexMap) -> IndexMap | None:  # a range's end: the row's own axis, or j
        terms: list[Term] = []
        for t in m.terms:
            if t.var == lead[-1] and t.div is None and t.mod is None:
                terms.append(Term(coef=t.coef, var="i", mod=dims[-2]))
            elif t.var in lead:
                return None
            else:
                terms.append(t.model_copy(update={"var": "j"}) if t.var == last else t)
        return None if m.gather is not None else m.model_copy(update={"terms": terms})

    viewed: set[str] = {a.tensor}
    failed = False

    def rewrite(e: Expr) -> Expr:
        nonlocal failed
        args = [rewrite(x) for x in e.args]
        upto = bound(e.upto) if e.kind == "reduce" and e.upto is not None else e.upto
        if e.kind == "reduce" and e.upto is not None and upto is None:
            failed = True
        if e.kind == "coord":
            got = [bound(m) for m in e.index]
            if any(m is None for m in got):
                failed = True
                return e
            return e.model_copy(update={"index": got})
        if e.kind != "load":
            return e.model_copy(update={"args": args, "upto": upto})
        t = spec.tensor_named(e.tensor or "")
        if [str(d) for d in t.shape] == dims and all(
            _is_coord(m, v) for m, v in zip(e.index, lead, strict=False)
        ):  # laid out like the output, read in the element's row
            col = column(e.index[-1])
        elif len(t.shape) == 1 and len(e.index) == 1 and e.index[0].gather is None:
            m = e.index[0]
            own = {t.var: t for t in m.terms if t.var in lead}
            ok = set(own) == set(lead) and all(
                x.div is None and x.mod is None and same(x.coef, s)
                for x, s in ((own[v], s) for v, s in zip(lead, strides, strict=False))
            )  # fmt: skip
            col = column(m.model_copy(update={"terms": [x for x in m.terms if x.var not in lead]}))
            if not ok or not same(t.shape[0], " * ".join(dims)):
                col = None
        else:
            col = None
        if col is None:
            failed = True
            return e
        viewed.add(t.name)
        return e.model_copy(update={"index": [IndexMap(terms=[Term(coef=1, var="i")]), col]})

    body = rewrite(a.expr)
    if failed:
        return None
    tensors = [t.model_copy(update={"shape": [rows, dims[-1]]}) if t.name in viewed else t
               for t in spec.tensors]  # fmt: skip
    program = Program(assigns=[Assign(tensor=a.tensor, vars=["i", "j"], expr=body)])
    return program, spec.model_copy(update={"tensors": tensors})


def _segment_views(program: Program, spec: TaskSpec) -> tuple[Program, TaskSpec] | None:
    """A 1-D output whose every element reduces a run of `c` consecutive elements of a flat
    input, the runs laid end to end (`d_out[i] = sum_{k < 256} d_in[256*i + k]`: each block's
    partial sum, the classic tree reduction): the input seen as `[rows, c]`, rows the output's
    length, and the program as a reduction along those rows, `d_out[i] = sum_k d_in[i, k]`.
    Reads at the element itself (`d_out[i]`) stay; None where any other read is not a run."""
    if len(program.assigns) != 1 or len(program.assigns[0].vars) != 1:
        return None
    a = program.assigns[0]
    (i,) = a.vars
    out_t = spec.tensor_named(a.tensor)
    if len(out_t.shape) != 1:
        return None
    rows = str(out_t.shape[0])
    sets = spec.all_size_sets()

    def same(x: Number | str, y: Number | str) -> bool:
        return _equal_at(x, y, sets)

    viewed: dict[str, str] = {}  # tensor -> the run's length
    flat: set[str] = set()  # tensors read at the element itself
    failed = False

    def run(m: IndexMap, t_shape: list[str], ranges: dict[str, Number]) -> str | None:
        """The run length `c` where `m` is `c*i + k` with k over [0, c) and the tensor holds
        exactly `rows` runs; else None."""
        if m.gather is not None or m.const != 0 or len(m.terms) != 2 or len(t_shape) != 1:
            return None
        if any(t.div is not None or t.mod is not None for t in m.terms):
            return None
        by_var = {t.var: t for t in m.terms}
        if i not in by_var or len(by_var) != 2:
            return None
        c = by_var.pop(i).coef
        ((k, tk),) = by_var.items()
        if tk.coef != 1 or k not in ranges or not same(ranges[k], c):
            return None
        return str(c) if same(t_shape[0], f"({rows}) * ({c})") else None

    def rewrite(e: Expr, ranges: dict[str, Number]) -> Expr:
        nonlocal failed
        if e.kind == "reduce":
            if e.upto is not None or e.var is None or e.extent is None:
                failed = True
                return e
            inner = {**ranges, e.var: e.extent}
            return e.model_copy(update={"args": [rewrite(x, inner) for x in e.args]})
        if e.kind == "coord":
            failed = True
            return e
        if e.kind != "load":
            return e.model_copy(update={"args": [rewrite(x, ranges) for x in e.args]})
        t = spec.tensor_named(e.tensor or "")
        if len(e.index) == 1 and _is_coord(e.index[0], i):
            flat.add(t.name)
            return e
        c = run(e.index[0], [str(d) for d in t.shape], ranges) if len(e.index) == 1 else None
        if c is None or viewed.get(t.name, c) != c:
            failed = True
            return e
        viewed[t.name] = c
        k = next(x.var for x in e.index[0].terms if x.var != i)
        return e.model_copy(update={"index": [IndexMap(terms=[Term(coef=1, var=i)]),
                                              IndexMap(terms=[Term(coef=1, var=k)])]})  # fmt: skip

    body = rewrite(a.expr, {})
    if failed or not viewed or flat & set(viewed) or a.tensor in viewed:
        return None
    tensors = [t.model_copy(update={"shape": [rows, viewed[t.name]]}) if t.name in viewed
               else t for t in spec.tensors]  # fmt: skip
    program = Program(assigns=[Assign(tensor=a.tensor, vars=[i], expr=body)])
    return program, spec.model_copy(update={"tensors": tensors})


def _equal_at(x: Number | str, y: Number | str, sets: list[dict[str, int]]) -> bool:
    """Whether two size expressions have the same value at every size set (False where
    either does not evaluate)."""
    try:
        return all(spec_eval(str(x), s) == spec_eval(str(y), s) for s in sets)
    except (ValueError, ArithmeticError, KeyError, SyntaxError):
        return False


def _is_coord(m: IndexMap, v: str) -> bool:
    if m.gather is not None or m.const != 0 or len(m.terms) != 1:
        return False
    t = m.terms[0]
    return (t.var, t.coef, t.div, t.mod) == (v, 1, None, None)
