"""Elementwise maps: every output element computed from inputs at the same (or a broadcast) index.

Recognises 1-D maps (one thread per element or grid-stride loops) and 2-D maps over a row-major
matrix with a leading dimension (``out[row*ld + col]``), with several inputs/outputs, scalar
parameters, row/column-vector broadcasts and chains of math functions. Anything with cross-thread
communication, reductions or data-dependent indices is left to other families.
"""

from __future__ import annotations

from typing import Any

from migrator.patterns import facts
from migrator.patterns.registry import MatchResult, Priority

from migrator.cuda import poly
from migrator.cuda.ir import Kernel, TranslationUnit


class ElementwiseMatcher:
    family = "elementwise"
    priority: Priority = "default"

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        no: list[str] = []
        stores = facts.global_stores(k)
        if not stores:
            no.append("writes no global memory")
        comm = facts.communication(k)
        if comm:
            no.append("threads cooperate through " + "; ".join(comm))
        if any(r.style == "loop_accumulate" for r in k.reductions):
            no.append("accumulates across loop iterations (a reduction)")
        odd_loops = [lp for lp in k.loops if lp.kind != "grid_stride"]
        if odd_loops:
            kinds = ", ".join(f"#{lp.id} {lp.kind}" for lp in odd_loops)
            no.append(f"has loops other than a grid-stride loop ({kinds})")
        if no:
            return MatchResult(family=self.family, kernel=k.name, matched=False, reasons=no)

        layout, why = _layout(k, stores)
        if layout is None:
            return MatchResult(family=self.family, kernel=k.name, matched=False, reasons=[why])
        reasons = [why]
        inputs: dict[str, str] = {}
        out_key = facts.key(stores[0].index[0])
        for st in stores:
            for ld in facts.loads(st.value, space="global"):
                idx = ld.index[0]
                if facts.key(idx) == facts.key(st.index[0]):
                    inputs.setdefault(ld.name or "?", "same")
                    continue
                kind = _broadcast_kind(idx, layout)
                if kind is None:
                    return MatchResult(
                        family=self.family,
                        kernel=k.name,
                        matched=False,
                        reasons=[
                            f"{ld.name} is read at {idx.canonical or idx.text}, not at the "
                            f"output index {out_key} or a row/column broadcast of it"
                        ],
                    )
                inputs[ld.name or "?"] = kind
        reasons.append(
            "inputs at the output index: "
            + (", ".join(f"{n} ({v})" for n, v in inputs.items()) or "none")
        )
        guards = {
            g.id for st in stores for g in (k.guards[i] for i in st.guards) if g.kind == "bounds"
        }
        if guards or any(lp.kind == "grid_stride" for lp in k.loops):
            reasons.append(
                "ragged edges guarded ("
                + ", ".join(
                    [k.guards[g].condition for g in sorted(guards)]
                    + [f"grid-stride bound {lp.bound.text}" for lp in k.loops if lp.bound]
                )
                + ")"
            )
        math = sorted(set().union(*(facts.calls(st.value) for st in stores)))
        if math:
            reasons.append("math: " + ", ".join(math))
        plan: dict[str, Any] = {
            "layout": layout,
            "outputs": [st.array for st in stores],
            "inputs": inputs,
            "scalars": [p.name for p in k.params if p.role == "scalar"],
            "math": math,
        }
        return MatchResult(
            family=self.family,
            kernel=k.name,
            matched=True,
            variant=layout["kind"],
            reasons=reasons,
            plan=plan,
        )


def _layout(k: Kernel, stores: list) -> tuple[dict[str, Any] | None, str]:  # type: ignore[type-arg]
    idx = stores[0].index[0]
    if any(facts.key(s.index[0]) != facts.key(idx) for s in stores):
        return None, "outputs are written at different indices"
    if not idx.affine:
        return None, f"output index {idx.text} is not affine"
    grid_stride = [lp for lp in k.loops if lp.kind == "grid_stride"]
    if grid_stride and idx.variant == [grid_stride[0].var]:
        return {"kind": "1d", "index": idx.text, "loop": "grid_stride"}, (
            f"1-D grid-stride loop over {grid_stride[0].var} writes {stores[0].array}[{idx.text}]"
        )
    if facts.is_global_index(idx, "x"):
        return {"kind": "1d", "index": idx.canonical}, (
            f"one thread per element: {stores[0].array}[{idx.canonical}]"
        )
    split = facts.row_major_2d(idx)
    if split is not None:
        row, ld, col = split
        if _is_global(row, "y") and _is_global(col, "x"):
            return {
                "kind": "2d",
                "ld": poly.render(ld),
                "row": poly.render(row),
                "col": poly.render(col),
            }, (
                f"2-D map: {stores[0].array}[row*{poly.render(ld)} + col] with row = "
                f"{poly.render(row)}, col = {poly.render(col)}"
            )
    return None, f"output index {idx.canonical} is not a per-thread element index"


def _is_global(p: poly.Poly, axis: str) -> bool:
    tid, bid = f"threadIdx.{axis}", f"blockIdx.{axis}"
    if p.get((tid,)) != 1:
        return False
    rest = poly.sub(p, {(tid,): 1})
    tile = poly.coefficient_of(rest, bid)
    return bool(tile) and poly.mul(tile, poly.sym(bid)) == rest


def _broadcast_kind(idx, layout: dict[str, Any]) -> str | None:  # type: ignore[no-untyped-def]
    """The same element in another pitched layout, a row/column broadcast, or a scalar."""
    if layout["kind"] != "2d" or not idx.affine:
        return "scalar" if idx.affine and not idx.variant else None
    split = facts.row_major_2d(idx)
    if split is not None:
        row, ld, col = split
        if poly.render(row) == layout["row"] and poly.render(col) == layout["col"]:
            return f"same element, leading dimension {poly.render(ld)}"
    axes = facts.axes(idx)
    if axes == {"x"} and poly.render(idx.as_poly()) == layout["col"]:
        return "row-vector broadcast (indexed by column)"
    if axes == {"y"} and poly.render(idx.as_poly()) == layout["row"]:
        return "column-vector broadcast (indexed by row)"
    return None
