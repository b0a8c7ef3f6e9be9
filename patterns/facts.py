"""Questions the matchers ask of a kernel's IR, answered once here (pure functions)."""

from __future__ import annotations

from migrator.cuda import poly
from migrator.cuda.builtins import BLOCK_SYMBOLS, THREAD_SYMBOLS
from migrator.cuda.ir import Expr, IndexExpr, Kernel, Store

INDEX_SYMBOLS = THREAD_SYMBOLS | BLOCK_SYMBOLS


def global_stores(k: Kernel) -> list[Store]:
    return [s for s in k.stores if s.space == "global"]


def loads(e: Expr, space: str | None = None) -> list[Expr]:
    return [n for n in e.walk() if n.kind == "load" and (space is None or n.space == space)]


def calls(e: Expr) -> set[str]:
    return {n.op for n in e.walk() if n.kind == "call" and n.op}


def reduces(e: Expr) -> list[Expr]:
    return [n for n in e.walk() if n.kind == "reduce"]


def communication(k: Kernel) -> list[str]:
    """Ways threads of the kernel cooperate (empty for a pure map)."""
    out: list[str] = []
    if k.shared:
        out.append("shared memory " + ", ".join(s.name for s in k.shared))
    if k.barriers:
        out.append(f"{len(k.barriers)} barrier(s)")
    warp = sorted({c.name for c in k.calls if c.kind == "warp"})
    if warp:
        out.append("warp intrinsics " + ", ".join(warp))
    atomics = sorted({c.name for c in k.calls if c.kind == "atomic"})
    if atomics:
        out.append("atomics " + ", ".join(atomics))
    return out


def key(e: IndexExpr) -> str:
    return e.canonical if e.affine and e.canonical else f"?{e.text}"


def axes(e: IndexExpr) -> set[str]:
    """Grid/block axes an index varies with: {'x'}, {'x', 'y'}, ..."""
    return {s.split(".")[-1][0] for s in e.variant if s in INDEX_SYMBOLS or "Idx." in s}


def loop_vars(e: IndexExpr, k: Kernel) -> set[str]:
    names = {lp.var for lp in k.loops if lp.var}
    return {s for s in e.variant if s in names}


def coefficient(e: IndexExpr, symbol: str) -> poly.Poly:
    return poly.coefficient_of(e.as_poly(), symbol)


def is_global_index(e: IndexExpr, axis: str) -> bool:
    """``blockIdx.a*blockDim.a + threadIdx.a`` (or a block-tiled ``blockIdx.a*T + threadIdx.a``)."""
    return e.pattern in (f"global_{axis}", f"block_tiled_{axis}")


def row_major_2d(e: IndexExpr) -> tuple[poly.Poly, poly.Poly, poly.Poly] | None:
    """Split ``row*ld + col`` where row varies with y and col with x: (row, ld, col) or None."""
    if not e.affine:
        return None
    p = e.as_poly()
    y_terms = {m: c for m, c in p.items() if any(s.endswith(".y") for s in m)}
    col = poly.sub(p, y_terms)
    if not y_terms or any(s.endswith(".y") for s in poly.symbols(col)):
        return None
    ld = poly.coefficient_of(p, "threadIdx.y")
    if len(ld) != 1:
        return None
    ((ld_m, ld_c),) = ld.items()
    row: poly.Poly = {}
    for m, c in y_terms.items():
        rest = list(m)
        for s in ld_m:
            if s not in rest:
                return None
            rest.remove(s)
        if c % ld_c:
            return None
        row = poly.add(row, {tuple(sorted(rest)): c // ld_c})
    if poly.mul(row, ld) != y_terms:
        return None
    return row, ld, col


def written_params(k: Kernel) -> list[str]:
    return [p.name for p in k.params if p.pointer_depth and p.role in ("out", "inout")]


def read_params(k: Kernel) -> list[str]:
    return [p.name for p in k.params if p.pointer_depth and p.role in ("in", "inout")]
