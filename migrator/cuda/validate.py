"""The kernel IR's invariants, executable: `validate(tu)` raises with the node, span and reason.

Pydantic checks field types; these rules check what types cannot say: ids refer to existing
loops/guards, accesses name a known array, affine forms agree with their canonical text, and
spans point into real lines. Tests run it on every translation unit the front end builds.
"""

from __future__ import annotations

from migrator.cuda import poly
from migrator.cuda.ir import IndexExpr, Kernel, TranslationUnit
from migrator.diagnostics import Span


class IRError(ValueError):
    """An IR invariant does not hold; a bug in the front end, not in the user's input."""


def _fail(kernel: Kernel, what: str, span: Span | None, reason: str) -> None:
    where = f" at {span}" if span is not None else ""
    raise IRError(f"kernel {kernel.name}: {what}{where}: {reason}")


def _check_index(k: Kernel, what: str, e: IndexExpr, span: Span) -> None:
    if e.affine:
        if e.canonical is None:
            _fail(k, what, span, "affine index without a canonical form")
        if poly.render(e.as_poly()) != e.canonical:
            _fail(
                k, what, span, f"terms render as {poly.render(e.as_poly())!r}, not {e.canonical!r}"
            )
        if e.reason is not None:
            _fail(k, what, span, "affine index with a non-affine reason")
    elif not e.reason:
        _fail(k, what, span, f"non-affine index {e.text!r} without a reason")


def validate_kernel(k: Kernel) -> None:
    loop_ids = {lp.id for lp in k.loops}
    guard_ids = {g.id for g in k.guards}
    if [lp.id for lp in k.loops] != list(range(len(k.loops))):
        _fail(k, "loops", k.span, "loop ids are not 0..n-1 in order")
    if [g.id for g in k.guards] != list(range(len(k.guards))):
        _fail(k, "guards", k.span, "guard ids are not 0..n-1 in order")
    for lp in k.loops:
        if lp.parent is not None and lp.parent not in loop_ids:
            _fail(k, f"loop #{lp.id}", lp.span, f"parent #{lp.parent} does not exist")
    arrays = (
        {p.name for p in k.params if p.pointer_depth}
        | {s.name for s in k.shared}
        | {a.name for a in k.local_arrays}
    )
    for a in k.accesses:
        what = f"access {a.kind} {a.array}"
        if a.space in ("global", "shared", "local") and a.array not in arrays:
            _fail(k, what, a.span, "names no pointer parameter or declared array")
        if not a.indices:
            _fail(k, what, a.span, "has no index")
        if set(a.loops) - loop_ids or set(a.guards) - guard_ids:
            _fail(k, what, a.span, "refers to a loop or guard that does not exist")
        if a.vector_width < 1:
            _fail(k, what, a.span, "vector width below 1")
        for e in a.indices:
            _check_index(k, what, e, a.span)
    for v in k.index_vars:
        _check_index(k, f"index variable {v.name}", v.expr, v.span)
    for b in k.barriers:
        if set(b.loops) - loop_ids or set(b.guards) - guard_ids:
            _fail(k, f"barrier {b.kind}", b.span, "refers to a loop or guard that does not exist")
    for r in k.reductions:
        if r.loop is not None and r.loop not in loop_ids:
            _fail(k, f"reduction {r.target}", r.span, f"loop #{r.loop} does not exist")
    for st in k.stores:
        what = f"store to {st.array}"
        if st.array not in arrays:
            _fail(k, what, st.span, "names no pointer parameter or declared array")
        for e in st.index:
            _check_index(k, what, e, st.span)
        for node in st.value.walk():
            if node.kind == "reduce" and node.loop is not None and node.loop not in loop_ids:
                _fail(k, what, st.span, f"reduction over loop #{node.loop} that does not exist")
            if node.kind == "load" and not node.index:
                _fail(k, what, st.span, f"load of {node.name} without an index")
    names = [p.name for p in k.params]
    if len(names) != len(set(names)):
        _fail(k, "parameters", k.span, "duplicate parameter names")
    for p in k.params:
        if (p.pointer_depth == 0) != (
            p.role in ("scalar",) or (p.is_reference and p.role == "out")
        ):
            _fail(k, f"parameter {p.name}", p.span, f"role {p.role} does not fit its type")


def validate(tu: TranslationUnit) -> TranslationUnit:
    """Check every invariant; returns the unit unchanged so it can be used inline."""
    seen: set[str] = set()
    for k in tu.kernels:
        if k.name in seen:
            raise IRError(f"{tu.file}: two functions named {k.name}")
        seen.add(k.name)
        validate_kernel(k)
    for s in tu.launch_sites:
        if not s.grid or not s.block:
            raise IRError(f"{s.span}: launch of {s.kernel} without grid or block")
    return tu
