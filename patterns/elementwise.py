"""Elementwise maps: every output element computed from inputs at the same (or a broadcast) index.

Recognises 1-D maps (one thread per element or grid-stride loops) and 2-D maps over a row-major
matrix with a leading dimension (``out[row*ld + col]``), with several inputs/outputs, scalar
parameters, row/column-vector broadcasts and chains of math functions. Anything with cross-thread
communication, reductions or data-dependent indices is left to other families.
"""

from __future__ import annotations

from typing import Any

from migrator.patterns import facts
from migrator.patterns.registry import FamilyMatcher, MatchResult, Priority

from migrator import diagnostics as diag
from migrator import nkiexpr
from migrator.contract import TaskSpec
from migrator.cuda import poly
from migrator.cuda.ir import Expr, Kernel, TranslationUnit
from migrator.nkiexpr import Untranslatable
from migrator.plan import ELEMENTWISE_FREE, PMAX, Plan, PlanError, bind, note, source_line


class ElementwiseMatcher(FamilyMatcher):
    family = "elementwise"
    priority: Priority = "default"

    def plan(self, match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
        return plan_kernel(match, tu, k, spec)

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
            return self.reject(k, why)
        # a store under `if (t > t2)` writes some elements only: the tile program stores every
        # element, so such a condition would be dropped silently (the lifter handles it)
        conditional = [
            f"{st.array} is written under `{k.guards[g].condition}`, which is not a bounds guard"
            for st in stores
            for g in st.guards
            if k.guards[g].kind != "bounds"
        ]
        if conditional:
            return self.reject(k, conditional[0])
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
        return self.accept(
            k,
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


def plan_kernel(match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """Tiles of P_TILE x F_TILE over the flat (1-D) or row/column (2-D) index space."""
    p = bind(tu, k, spec, "elementwise", match.variant)
    layout = (match.plan or {})["layout"]
    stores = facts.global_stores(k)
    kinds: dict[str, str] = (match.plan or {}).get("inputs", {})
    loads: dict[str, dict[str, str]] = {}

    def tile_of(ld: Expr) -> str:
        t = p.tensor_for_param(ld.name or "")
        if t is None:
            raise Untranslatable(f"{ld.name} is not a tensor of the task")
        kind = kinds.get(ld.name or "", "same")
        # a row vector indexed by the column is one partition wide ([1, F]); a column vector
        # indexed by the row is one element per partition ([P, 1]); nl ops broadcast both
        index = (
            "i_f"
            if kind.startswith("row-vector")
            else "i_p"
            if kind.startswith("column-vector")
            else "idx"
            if layout["kind"] == "1d"
            else "i_p, i_f"
        )
        if kind == "scalar":
            raise Untranslatable(f"{ld.name} is read at a fixed index (a scalar load)")
        loads.setdefault(
            t.name,
            {
                "tensor": t.name,
                "var": f"{t.name}_tile",
                "index": index,
                "masked": "same" in kind or kind.startswith("same"),
            },
        )
        return loads[t.name]["var"]

    rendered = []
    for st in stores:
        out = p.tensor_for_param(st.array)
        if out is None:
            raise PlanError(diag.make("NOT_EMITTED", st.span, what=f"output {st.array}"))
        try:
            expr = nkiexpr.render(st.value, tile_of, p.params)
            legacy = nkiexpr.render(st.value, tile_of, p.params, fuse=True)
        except Untranslatable as e:
            raise PlanError(diag.make("NOT_EMITTED", st.span, what=str(e))) from e
        rendered.append(
            {
                "tensor": out.name,
                "var": out.var,
                "expr": expr,
                "legacy": legacy,  # the legacy dialect fuses scalar ops (nisa.tensor_scalar)
                "note": note(st.span, source_line(st.span)),
            }
        )
    _share_values(rendered, "expr", "local")
    _share_values(rendered, "legacy", "local_legacy")
    first_out = p.tensor_for_param(stores[0].array)
    assert first_out is not None
    p.constants = {"P_TILE": PMAX, "F_TILE": ELEMENTWISE_FREE}
    guards = [k.guards[g] for g in stores[0].guards if k.guards[g].kind == "bounds"]
    loop = next((lp for lp in k.loops if lp.kind == "grid_stride"), None)
    guard_span = guards[0].span if guards else (loop.span if loop else k.span)
    guard_text = (
        guards[0].condition
        if guards
        else (f"{loop.var} {loop.cmp} {loop.bound.text}" if loop and loop.bound else "bounds")
    )
    idx_span = loop.span if loop else stores[0].span
    p.notes = {
        "index": note(
            idx_span, "one CUDA thread per element" + (" (grid-stride loop)" if loop else "")
        ),
        "guard": note(guard_span, f"bounds guard `{guard_text}` becomes the tile mask"),
    }
    fields: dict[str, Any] = {
        "uses_isa": any("nisa." in r["legacy"] for r in rendered),
        "kind": layout["kind"],
        "summary": ", ".join(f"{r['tensor']} = {r['expr']}" for r in rendered),
        "loads": list(loads.values()),
        "stores": rendered,
        "size_params": {},
        "constant_notes": {
            "P_TILE": "partitions per tile (nl.tile_size.pmax)",
            "F_TILE": "elements per partition per tile: 2 KiB fp32 DMAs",
        },
    }
    if layout["kind"] == "1d":
        fields["extent"] = first_out.shape[0]
    else:
        fields["rows"], fields["cols"] = first_out.shape[0], first_out.shape[1]
    p.fields = fields
    return p


def _share_values(rendered: list[dict[str, Any]], key: str, local: str) -> None:
    """An output whose value a later output also computes (AdamW's `m` inside the parameter
    update) is computed once into a local: the later expression refers to it by name."""
    for i, r in enumerate(rendered):
        r[local] = None
        expr = r[key]
        if "(" not in expr:  # a bare tile: nothing to share
            continue
        later = rendered[i + 1 :]
        if any(expr in x[key] for x in later):
            r[local] = f"{r['tensor']}_value"
            for x in later:
                x[key] = x[key].replace(expr, r[local])
