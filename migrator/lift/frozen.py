"""Frozen loop bounds: a loop whose trip count no size set tried ever varied.

A lifted program holds at the sizes it was fitted and verified at. Where a loop's bound is a
scalar the host derives from the sizes (`m = max(1, SMs * 8 / (block_size * blocks))`) and the
relations keep that scalar at one value at every one of those sets (m = 1: the loop runs
once), the loop's work for any other value was never seen: the program fitted (`dst += src`)
may hold only at that value, a silent wrong answer everywhere else. Such a kernel is not
emitted; the diagnostic names the scalar, its value and the loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel

from migrator.contract import ScalarSpec, TaskSpec
from migrator.cuda.ir import Kernel, Loop

_NAME = re.compile(r"[A-Za-z_]\w*")


class FrozenBound(BaseModel):
    """`scalar` (`expr` of the sizes) is `value` at every size set tried, and bounds `loop`."""

    scalar: str
    expr: str
    value: int | float | bool
    loop: Loop


def frozen_bounds(
    kernel: Kernel, spec: TaskSpec, size_sets: Iterable[dict[str, int]]
) -> list[FrozenBound]:
    """The loops of `kernel` bounded by a scalar whose size expression takes one value at all
    of `size_sets` (a scalar given as a value, or as one size, is the contract: not listed)."""
    sets = list(size_sets)
    derived = {s.cuda_param: s for s in spec.scalars if _derived(s, set(spec.sizes))}
    if not derived or not sets:
        return []
    # index variables the bound reads through (`int n_rows = m;` ... `l < n_rows`)
    defs = {v.name: set(_NAME.findall(v.expr.text)) for v in kernel.index_vars}
    out: list[FrozenBound] = []
    for loop in kernel.loops:
        if loop.bound is None:
            continue
        # (the bound's affine terms name what it reads through plain local copies too)
        reads = _reads(loop.bound.text, defs) | {x for t in loop.bound.terms for x in t.symbols}
        for name in sorted(reads & derived.keys()):
            s = derived[name]
            values = set()
            for sizes in sets:
                try:
                    values.add(spec.scalar_value(s, sizes))
                except (KeyError, ValueError, ZeroDivisionError, ArithmeticError):
                    continue
            if len(values) == 1:
                assert s.size is not None
                out.append(FrozenBound(scalar=name, expr=s.size, value=values.pop(), loop=loop))
    return out


def _derived(s: ScalarSpec, sizes: set[str]) -> bool:
    """A scalar computed from the sizes by an expression (not one size, not a constant)."""
    if s.size is None:
        return False
    text = s.size.strip()
    return not text.isidentifier() and bool(set(_NAME.findall(text)) & sizes)


def _reads(text: str, defs: dict[str, set[str]]) -> set[str]:
    """The names `text` reads, directly or through the index variables of `defs`."""
    seen: set[str] = set()
    todo = set(_NAME.findall(text))
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo |= defs.get(n, set())
    return seen
