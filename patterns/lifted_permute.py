"""Lowering rule for copies with their axes permuted, over a lifted program:

    q[b, h, t, e] = inp[b, t, 0, h, e]

(llm.c's QKV split, `(B, T, 3, NH, d)` to three `(B, NH, T, d)` tensors, and its inverse). The
views step (`migrator.lift.views`) turns the flat kernel's mixed-radix index arithmetic into
these N-D tensors. On Trainium this is data movement only: rows of the innermost axis (it must
stay innermost: contiguous in both tensors) on the free axis; one outer output axis on the
partitions, the axes after it whole on the free axis too (`out[b, t, h, e]` from
`inp[b, h, t, e]`: [128 t, NH, d] tiles, each stored as contiguous rows), the axes before it as
loops: the axis chosen makes the fewest tiles. Constant indices (which of Q, K, V) are fixed
offsets of the load.
"""

from __future__ import annotations

import math
from typing import Any

from migrator.patterns.lifted import (
    _bind,
    _index_text,
    _lift_note,
    _NoFit,
    _Renderer,
    _tensor,
    _unit_var,
)

from migrator.contract import TaskSpec
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.lift.program import Assign, Expr, Program
from migrator.plan import PMAX, Plan, note

F_TILE = 512  # elements of the innermost axis per partition per tile (2 KiB of fp32)
FREE_MAX = 4096  # elements per partition of one tile (16 KiB of fp32 of SBUF's 192 KiB)


def _partition_axis(sets: list[tuple[int, ...]]) -> int:
    """The outer axis whose rows go on the partitions, the axes after it whole on the free
    axis (the innermost tiled by F_TILE): the fewest tiles at the default sizes (`sets[0]`),
    within FREE_MAX elements per partition at every size set (the axis before the innermost
    always is)."""
    last = len(sets[0]) - 1

    def tiles(n: int) -> float:
        for ext in sets:
            if math.prod(ext[n + 1 : last]) * min(ext[last], F_TILE) > FREE_MAX:
                return math.inf
        ext = sets[0]
        return math.prod(ext[:n]) * -(-ext[n] // PMAX) * -(-ext[last] // F_TILE)

    return min(range(last), key=lambda n: (tiles(n), n != last - 1, -sets[0][n]))


def _copied(a: Assign) -> tuple[Expr, bool] | None:
    """The permuted load of `a` and whether it is added to the output's old value
    (`dinp[i] = dinp[i] + dout[...]`, a backward pass accumulating), or None."""
    e = a.expr
    if len(a.vars) < 3:
        return None
    if e.kind == "load":
        return e, False
    if e.kind == "op" and e.op == "+" and len(e.args) == 2:
        own = [x for x in e.args if x.kind == "load" and x.tensor == a.tensor
               and [_unit_var(m) for m in x.index] == list(a.vars)]  # fmt: skip
        other = [x for x in e.args if x not in own]
        if len(own) == 1 and len(other) == 1 and other[0].kind == "load":
            return other[0], True
    return None


def permute(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    copied = [_copied(a) for a in program.assigns]
    if any(c is None for c in copied):
        raise _NoFit("not a copy with its axes permuted (three axes or more), or one added to "
                     "the output's old value")  # fmt: skip
    p = _bind(tu, k, spec, "permute", "lifted")
    r = _Renderer(p, spec, lambda ld: "")
    copies: list[dict[str, Any]] = []
    for a, (e, adds) in zip(program.assigns, copied, strict=True):  # type: ignore[misc]
        axis_of: dict[str, int] = {}
        for ax, m in enumerate(e.index):
            var = _unit_var(m)
            if var is not None and var in a.vars and var not in axis_of:
                axis_of[var] = ax
            elif var is not None or m.terms or m.gather is not None:
                raise _NoFit(f"{e.render()}: an index other than an output axis or a constant")
        if set(axis_of) != set(a.vars):
            raise _NoFit(f"{a.render()}: an output axis the input lacks (a broadcast)")
        inner = a.vars[-1]
        if axis_of[inner] != len(e.index) - 1:
            raise _NoFit(f"{a.render()}: the innermost axis moves (a transpose)")
        x, out = _tensor(p, e.tensor), _tensor(p, a.tensor)
        if adds and out.role != "inout":
            raise _NoFit(f"{a.tensor} adds its old value but is not an inout tensor")
        out_spec = spec.tensor_named(a.tensor)
        part = _partition_axis([spec.shape_of(out_spec, s) for s in spec.all_size_sets()])
        last = len(a.vars) - 1
        middle = list(range(part + 1, last))
        rank = len(middle) + 2
        loops = [(f"l{n}", out.shape[n]) for n in range(part)]

        legacy = {a.vars[n]: f"l{n}" for n in range(part)}
        legacy.update({a.vars[part]: "i_p", inner: "i_f"})
        legacy.update({a.vars[m]: f"i_m{m}" for m in middle})
        aranges = [("i_p", _arange(rank, 0, "P_TILE", "rt * P_TILE + "))]
        aranges += [(f"i_m{m}", _arange(rank, q + 1, out.shape[m])) for q, m in enumerate(middle)]
        aranges.append(("i_f", _arange(rank, rank - 1, "f_width", "ct * f_width + ")))
        loads = dict(legacy, **{a.vars[part]: "r0 : r0 + rs", inner: "c0 : c0 + cs"})
        loads.update({a.vars[m]: f"m{m}" for m in middle})
        stores = dict(loads, **{a.vars[m]: f"0 : {out.shape[m]}" for m in middle})

        copies.append({
            "x": x.name, "out": out.var, "dtype": out.nl_dtype, "loops": loops,
            "rows": out.shape[part], "cols": out.shape[-1], "aranges": aranges,
            "src": _index_text(e, legacy, r), "dst": ", ".join(legacy[v] for v in a.vars),
            "middle": [(f"m{m}", out.shape[m]) for m in middle],
            "tile_shape": ", ".join(["P_TILE", *(out.shape[m] for m in middle), "f_width"]),
            "tile_load": ", ".join(["0 : rs", *(f"m{m}" for m in middle), "0 : cs"]),
            "tile_store": ", ".join(["0 : rs", *(f"0 : {out.shape[m]}" for m in middle),
                                     "0 : cs"]),
            "src_new": _index_text(e, loads, r), "dst_new": ", ".join(stores[v] for v in a.vars),
            "note": _lift_note(k, Program(assigns=[a])),
            "old": out.name if adds else None,
        })  # fmt: skip
    p.constants = {"P_TILE": PMAX, "F_TILE": F_TILE}
    p.notes = {"tile": note(k.span, "one output element per CUDA thread: here whole rows of the "
                            "innermost axis move by DMA, 128 rows per tile")}  # fmt: skip
    p.fields.update({
        "copies": copies,
        "summary": "; ".join(a.render() for a in program.assigns),
        "constant_notes": {"P_TILE": "rows per tile (partitions, nl.tile_size.pmax)",
                           "F_TILE": "innermost-axis elements per row per tile"},
    })  # fmt: skip
    return p


def _arange(rank: int, pos: int, extent: str, start: str = "") -> str:
    """An index along axis `pos` of a rank-`rank` tile (`nl.arange(n)[None, :, None]`)."""
    shape = ", ".join(":" if q == pos else "None" for q in range(rank))
    return f"{start}nl.arange({extent})[{shape}]"
