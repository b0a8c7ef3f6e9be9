"""Lowering rule for window reductions (pooling) over a lifted program:

    out[i, j] = f(red_{k < K} x[s_h*i + a_k + c_h, s_w*j + b_k + c_w])

with `red` a sum, max or min over a fixed window (K literal, every offset (a_k, b_k) a number,
the window possibly spelled as nested reductions), the strides literal and `f` any map of the
reduction with scalars (`0.25 * s`, `s / 9`). Output rows go on the partitions: the window's
input rows of each output row are one DMA ([P, rows of the window, W]), and each tap is a strided
free-axis view of that tile, combined on VectorE in the program's order.
"""

from __future__ import annotations

import itertools

from migrator.patterns.lifted import (
    _bind,
    _clip,
    _lift_note,
    _NoFit,
    _Renderer,
    _tensor,
    _the_output,
    reduce_key,
)

from migrator.contract import TaskSpec
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.lift.program import Expr, IndexMap, Program
from migrator.nkiexpr import Untranslatable
from migrator.plan import PMAX, Plan, note

MAX_TAPS = 64  # window elements combined one VectorE instruction each
_COMBINE = {"sum": "add", "max": "maximum", "min": "minimum"}  # the nl operation of each


def window(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program, 2)
    i, j = a.vars
    outer = _outermost(a.expr)
    if len(outer) != 1:
        raise _NoFit("not one window reduction")
    red = outer[0]
    taps, x, strides, offs = _taps(red, i, j)
    p = _bind(tu, k, spec, "window", "lifted")
    xt, out = _tensor(p, x), _tensor(p, a.tensor)
    if len(xt.shape) != 2:
        raise _NoFit(f"{x} is not a matrix")
    rows_used = sorted({dy for dy, _ in taps})
    wh = rows_used[-1] + 1
    if offs[0] < 0 or offs[1] < 0:
        raise _NoFit("a window reaching before the first row or column (padding)")

    def tile_of(ld: Expr) -> str:
        raise Untranslatable(f"{ld.render()} outside the window reduction")

    epilogue = {}
    try:
        for api, acc in (("legacy", "acc"), ("new", "acc[0:nr, :]")):
            r = _Renderer(p, spec, tile_of)
            r.reduced[reduce_key(red)] = acc
            epilogue[api] = r.render(a.expr)
    except Untranslatable as e:
        raise _NoFit(str(e)) from e
    s_h, s_w = strides
    p.constants = {"P_TILE": PMAX}
    p.notes = {
        "rows": note(k.span, f"one output row per partition; its window's input rows "
                     f"({s_h} * i + {offs[0]} ... + {wh - 1}) in one DMA"),
        "taps": note(k.span, f"{len(taps)} taps, each a strided view (step {s_w}) of the "
                     f"rows tile, combined by {red.op} on VectorE"),
        "store": _lift_note(k, program),
    }  # fmt: skip
    p.fields.update({
        "x": xt.name, "out": out.var, "rows": out.shape[0], "cols": out.shape[1],
        "in_cols": xt.shape[1], "s_h": s_h, "s_w": s_w, "c_h": offs[0], "wh": wh,
        "taps": [{"dy": dy, "dx": dx + offs[1]} for dy, dx in taps],
        "combine": _COMBINE[red.op or ""],
        "epilogue": epilogue["legacy"], "epilogue_new": epilogue["new"],
        "uses_isa": True, "summary": _clip(a.render(), 200),
        "constant_notes": {"P_TILE": "output rows per tile, one per partition"},
    })  # fmt: skip
    return p


def _outermost(e: Expr) -> list[Expr]:
    """The reductions of `e` not inside another reduction."""
    if e.kind == "reduce":
        return [e]
    return [r for a in e.args for r in _outermost(a)]


def _taps(
    red: Expr, i: str, j: str
) -> tuple[list[tuple[int, int]], str, tuple[int, int], tuple[int, int]]:
    """The window of `red` (a reduction over literal ranges, possibly nested, of one load):
    its taps (row offset from the first row read, column offset) in the program's order, the
    tensor, the (row, column) strides and the first (row, column) read for output (0, 0)."""
    if red.op not in _COMBINE:
        raise _NoFit(f"a {red.op} reduction")
    levels: list[tuple[str, int]] = []
    e = red
    while e.kind == "reduce":
        if e.op != red.op or e.upto is not None or not isinstance(e.extent, int):
            raise _NoFit("a window whose size is not a literal")
        levels.append((e.var or "", e.extent))
        e = e.args[0]
    if e.kind != "load" or len(e.index) != 2:
        raise _NoFit(f"the window's element {_clip(e.render(), 60)} is not a matrix's element")
    n = 1
    for _, ext in levels:
        n *= ext
    if n > MAX_TAPS:
        raise _NoFit(f"a window of {n} elements (at most {MAX_TAPS})")
    m_row, m_col = e.index

    def at(m: IndexMap, env: dict[str, int]) -> int:
        if m.gather is not None or not isinstance(m.const, int):
            raise _NoFit(f"{m.render()} is not a literal window offset")
        v = m.const
        for t in m.terms:
            if not isinstance(t.coef, int) or t.var not in env:
                raise _NoFit(f"{m.render()} is not a literal window offset")
            x = env[t.var]
            if t.div is not None:
                if not isinstance(t.div, int):
                    raise _NoFit(f"{m.render()}: a window split by a size")
                x //= t.div
            if t.mod is not None:
                if not isinstance(t.mod, int):
                    raise _NoFit(f"{m.render()}: a window split by a size")
                x %= t.mod
            v += t.coef * x
        return v

    names = [v for v, _ in levels]
    combos = [dict(zip(names, c, strict=True)) for c in
              itertools.product(*(range(ext) for _, ext in levels))]  # fmt: skip
    base = {i: 0, j: 0}
    strides = []
    for m, var in ((m_row, i), (m_col, j)):
        s = [at(m, {**base, var: q, **c}) - at(m, {**base, **c}) for c in combos[:1]
             for q in (1, 2, 3)]  # fmt: skip
        if s != [s[0], 2 * s[0], 3 * s[0]] or s[0] <= 0:
            raise _NoFit(f"{m.render()} does not step by a positive literal with the output")
        other = j if var == i else i
        if any(at(m, {**base, other: 5, **c}) != at(m, {**base, **c}) for c in combos):
            raise _NoFit(f"{m.render()} mixes the output's row and column")
        strides.append(s[0])
    taps = [(at(m_row, {**base, **c}), at(m_col, {**base, **c})) for c in combos]
    lo_r = min(dy for dy, _ in taps)
    lo_c = min(dx for _, dx in taps)
    return ([(dy - lo_r, dx - lo_c) for dy, dx in taps], e.tensor or "",
            (strides[0], strides[1]), (lo_r, lo_c))  # fmt: skip
