"""Integer polynomials over named symbols: the algebra behind index expressions.

An index such as ``blockIdx.x*blockDim.x + threadIdx.x`` or ``row*K + k`` is a polynomial whose
monomials are products of symbols (``blockIdx.x``, ``K``, ...). An index is *affine* in the
thread/block/loop indices when no monomial contains two of those "variant" symbols (``row*K`` is
fine when ``K`` is a kernel parameter; ``threadIdx.x*threadIdx.y`` is not). Pure functions only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Monomial = tuple[str, ...]  # sorted symbol names; () is the constant term
Poly = dict[Monomial, int]


def const(c: int) -> Poly:
    return {(): c} if c else {}


def sym(name: str) -> Poly:
    return {(name,): 1}


def add(a: Poly, b: Poly) -> Poly:
    out = dict(a)
    for m, c in b.items():
        v = out.get(m, 0) + c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def neg(a: Poly) -> Poly:
    return {m: -c for m, c in a.items()}


def sub(a: Poly, b: Poly) -> Poly:
    return add(a, neg(b))


def mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            v = out.get(m, 0) + ca * cb
            if v:
                out[m] = v
            else:
                out.pop(m, None)
    return out


def scale(a: Poly, k: int) -> Poly:
    return {m: c * k for m, c in a.items()} if k else {}


def exact_div(a: Poly, k: int) -> Poly | None:
    """``a / k`` when every coefficient divides exactly (so C truncation changes nothing)."""
    if k == 0 or any(c % k for c in a.values()):
        return None
    return {m: c // k for m, c in a.items()}


def constant_value(a: Poly) -> int | None:
    if not a:
        return 0
    if set(a) == {()}:
        return a[()]
    return None


def symbols(a: Poly) -> set[str]:
    return {s for m in a for s in m}


def is_affine_in(a: Poly, variant: Iterable[str]) -> bool:
    """True when each monomial has at most one factor from `variant` (counted with multiplicity)."""
    vs = set(variant)
    return all(sum(1 for s in m if s in vs) <= 1 for m in a)


def coefficient_of(a: Poly, name: str) -> Poly:
    """The polynomial multiplying `name` in the monomials that contain it exactly once."""
    out: Poly = {}
    for m, c in a.items():
        if m.count(name) == 1:
            rest = list(m)
            rest.remove(name)
            out = add(out, {tuple(rest): c})
    return out


def substitute(a: Poly, values: Mapping[str, Poly]) -> Poly:
    out: Poly = {}
    for m, c in a.items():
        term = const(c)
        for s in m:
            term = mul(term, values.get(s, sym(s)))
        out = add(out, term)
    return out


def evaluate(a: Poly, values: Mapping[str, int]) -> int:
    total = 0
    for m, c in a.items():
        v = c
        for s in m:
            v *= values[s]
        total += v
    return total


def render(a: Poly) -> str:
    """Canonical text: terms ordered by degree then name, e.g. ``blockDim.x*blockIdx.x + 3``."""
    if not a:
        return "0"
    parts: list[str] = []
    order = sorted(a, key=_term_rank)
    first_pos = next((i for i, m in enumerate(order) if a[m] > 0), 0)
    order.insert(0, order.pop(first_pos))  # read `tid - offset`, not `-offset + tid`
    for m in order:
        c = a[m]
        body = "*".join(sorted(m, key=_factor_rank))
        if not m:
            text = str(abs(c))
        elif abs(c) == 1:
            text = body
        else:
            text = f"{abs(c)}*{body}"
        if not parts:
            parts.append(text if c > 0 else f"-{text}")
        else:
            parts.append(("+ " if c > 0 else "- ") + text)
    return " ".join(parts)


def _factor_rank(name: str) -> tuple[int, str]:
    # written the way CUDA code reads: blockIdx.x*blockDim.x*ld
    for i, prefix in enumerate(("blockIdx", "threadIdx", "blockDim", "gridDim")):
        if name.startswith(prefix):
            return (i, name)
    return (4, name)


def _term_rank(m: Monomial) -> tuple[int, int, int, int, str]:
    # Reading order of row-major indexing: strided terms (scaled by a size such as K or ld)
    # first, each group ordered z, y, other, x; then the constant.
    if not m:
        return (2, 0, 0, 0, "")
    builtin = ("blockIdx", "threadIdx", "blockDim", "gridDim", "floordiv(", "mod(")
    strided = 0 if len(m) > 1 and any(not s.startswith(builtin) for s in m) else 1
    axis = 2
    for g, name in ((0, "z"), (1, "y"), (3, "x")):
        if any(f"Idx.{name}" in s for s in m):  # also floordiv(threadIdx.x, 32)
            axis = g
            break
    has_block = 0 if any(s.startswith("blockIdx") for s in m) else 1
    return (strided, axis, has_block, -len(m), "*".join(sorted(m, key=_factor_rank)))
