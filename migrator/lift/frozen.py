"""Frozen scalars: a scalar the host derives from the sizes that no size set tried ever varied.

A lifted program holds at the sizes it was fitted and verified at. Where the kernel reads an
integer the host computes from the sizes (`m = max(1, SMs * 8 / (block_size * blocks))`) and
the relations keep it at one value at every one of those sets (m = 1), what the kernel does
for any other value was never seen: a loop it bounds ran once each time, an offset it scales
was one stride, and the program fitted (`dst += src`) may hold only at that value, a silent
wrong answer everywhere else. Such a kernel is not emitted; the diagnostic names the scalar,
its value and, where it bounds one, the loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel

from migrator.contract import ScalarSpec, TaskSpec
from migrator.cuda.ir import Kernel, Loop

_NAME = re.compile(r"[A-Za-z_]\w*")


class FrozenScalar(BaseModel):
    """`scalar` (`expr` of the sizes) is `value` at every size set tried; `loop`: the first
    loop it bounds, if any."""

    scalar: str
    expr: str
    value: int | float | bool
    loop: Loop | None = None

    def use(self) -> str:
        """Where the kernel reads it, in words."""
        if self.loop is None:
            return "the kernel reads it"
        return f"it bounds the loop over {self.loop.var or 'an unnamed variable'}"


def frozen_scalars(
    kernel: Kernel, spec: TaskSpec, size_sets: Iterable[dict[str, int]]
) -> list[FrozenScalar]:
    """The scalars `kernel` reads whose size expression takes one value at all of
    `size_sets` (a scalar given as a value, or as one size, is the contract: not listed)."""
    sets = list(size_sets)
    read = {p.name for p in kernel.params if not p.pointer_depth and p.role != "unused"}
    derived = [s for s in spec.scalars if s.cuda_param in read and _derived(s, set(spec.sizes))]
    if not derived or not sets:
        return []
    # index variables a bound reads through (`int n_rows = m;` ... `l < n_rows`)
    defs = {v.name: set(_NAME.findall(v.expr.text)) for v in kernel.index_vars}
    out: list[FrozenScalar] = []
    for s in derived:
        values = set()
        for sizes in sets:
            try:
                values.add(spec.scalar_value(s, sizes))
            except (KeyError, ValueError, ZeroDivisionError, ArithmeticError):
                continue
        if len(values) != 1:
            continue
        assert s.size is not None
        loop = next((lp for lp in kernel.loops if lp.bound is not None
                     and s.cuda_param in _bound_reads(lp, defs)), None)  # fmt: skip
        out.append(FrozenScalar(scalar=s.cuda_param, expr=s.size, value=values.pop(), loop=loop))
    return out


def _derived(s: ScalarSpec, sizes: set[str]) -> bool:
    """A scalar computed from the sizes by an expression (not one size, not a constant)."""
    if s.size is None:
        return False
    text = s.size.strip()
    return not text.isidentifier() and bool(set(_NAME.findall(text)) & sizes)


def _bound_reads(loop: Loop, defs: dict[str, set[str]]) -> set[str]:
    """The names a loop's bound reads, directly or through index variables (`defs`); its
    affine terms name what it reads through plain local copies too."""
    assert loop.bound is not None
    seen: set[str] = set()
    todo = set(_NAME.findall(loop.bound.text)) | {x for t in loop.bound.terms for x in t.symbols}
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo |= defs.get(n, set())
    return seen
