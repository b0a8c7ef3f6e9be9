"""Stencils and small convolutions: each output is a weighted sum of neighbouring inputs.

Recognised from the dataflow: the stored value is a sum over a short counted loop (constant
bounds, e.g. ``-R..R``) of a weight times a load at ``centre + k``, either straight from global
memory or from a shared tile filled with halos (loads at ``centre - R`` and ``centre + BLOCK``).
"""

from __future__ import annotations

from migrator.patterns import facts
from migrator.patterns.registry import FamilyMatcher, MatchResult, Priority

from migrator import diagnostics as diag
from migrator.contract import TaskSpec
from migrator.cuda import poly
from migrator.cuda.ir import Expr, Kernel, TranslationUnit
from migrator.plan import ELEMENTWISE_FREE, PMAX, Plan, PlanError, bind, note, source_line


class StencilMatcher(FamilyMatcher):
    family = "stencil"
    priority: Priority = "default"

    def plan(self, match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
        return plan_kernel(match, tu, k, spec)

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        for st in facts.global_stores(k):
            for red in facts.reduces(st.value):
                if red.op != "sum" or red.loop is None:
                    continue
                loop = k.loops[red.loop]
                lo = loop.start.as_poly() if loop.start and loop.start.affine else None
                hi = loop.bound.as_poly() if loop.bound and loop.bound.affine else None
                lo_c = poly.constant_value(lo) if lo is not None else None
                hi_c = poly.constant_value(hi) if hi is not None else None
                if lo_c is None or hi_c is None or loop.var is None:
                    continue
                taps = [
                    ld
                    for ld in facts.loads(red.args[-1])
                    if ld.index and loop.var in ld.index[-1].variant
                ]
                data = [ld for ld in taps if _is_data(ld, loop.var)]
                if not data:
                    continue
                src = data[0]
                radius_hi = hi_c - (1 if loop.cmp == "<" else 0)
                width = radius_hi - lo_c + 1
                weights = [ld.name for ld in taps if ld is not src]
                halo = _halo(k, src) if src.space == "shared" else None
                reasons = [
                    f"{st.array}[{st.index[0].canonical}] = sum over {loop.var} in "
                    f"[{lo_c}, {radius_hi}] of "
                    + (f"{weights[0]}[...] * " if weights else "")
                    + f"{src.name}[{src.index[-1].canonical}]",
                    f"{width} taps" + (f", weights from {weights[0]}" if weights else ""),
                ]
                if halo:
                    reasons.append(halo)
                return MatchResult(
                    family=self.family,
                    kernel=k.name,
                    matched=True,
                    variant="1d",
                    reasons=reasons,
                    plan={
                        "variant": "1d",
                        "output": st.array,
                        "input": _global_source(k, src),
                        "taps": width,
                        "offset_low": lo_c,
                        "weights": weights[0] if weights else None,
                        "shared_tile": src.name if src.space == "shared" else None,
                    },
                )
        return self.reject(k, "no store of a short constant-range weighted sum of neighbours")


def _is_data(ld: Expr, var: str) -> bool:
    """A tap reads at ``centre + var`` (thread-dependent), unlike a weight ``w[var + R]``."""
    idx = ld.index[-1]
    return (
        idx.affine
        and any("threadIdx" in s or "blockIdx" in s for s in idx.variant)
        and poly.coefficient_of(idx.as_poly(), var) == {(): 1}
    )


def _global_source(k: Kernel, ld: Expr) -> str | None:
    if ld.space == "global":
        return ld.name
    for st in k.stores:
        if st.array == ld.name:
            for node in st.value.walk():
                if node.kind == "load" and node.space == "global":
                    return node.name
    return None


def _halo(k: Kernel, ld: Expr) -> str | None:
    fills = [s for s in k.stores if s.array == ld.name]
    if len(fills) < 2:
        return None
    return f"shared tile {ld.name} filled by {len(fills)} loads (centre plus halos)"


def plan_kernel(match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """Flat tiles as in elementwise maps; one masked, shifted load per tap (zero outside the
    array, like the CUDA halo), weights as trace-time constants from the `__constant__` table."""
    info = match.plan or {}
    p = bind(tu, k, spec, "stencil", match.variant)
    x, out = p.tensor_for_param(info["input"] or ""), p.tensor_for_param(info["output"])
    if x is None or out is None or len(x.shape) != 1:
        raise PlanError(
            diag.make("NOT_EMITTED", k.span, what="a stencil over other than one 1-D input tensor")
        )
    table = next((c for c in tu.constants if c.name == info.get("weights")), None)
    if table is None or table.init_values is None:
        raise PlanError(
            diag.make(
                "NOT_EMITTED",
                k.span,
                what="stencil weights that are not a constant table initialised in the source",
            )
        )
    weights = table.init_values[: info["taps"]]
    st = next(s for s in facts.global_stores(k) if s.array == info["output"])
    p.constants = {"P_TILE": PMAX, "F_TILE": ELEMENTWISE_FREE, "LOW": info["offset_low"]}
    p.notes = {
        "weights": note(table.span, f"__constant__ {table.name}[{len(weights)}]"),
        "halo": note(
            k.shared[0].span if k.shared else k.span,
            "shared tile with halos: each tap is a shifted load instead, zero outside the array",
        ),
        "store": note(st.span, source_line(st.span)),
    }
    p.fields = {
        "x": x.name,
        "out": out.var,
        "n": x.shape[0],
        "weights": weights,
        "constant_notes": {
            "P_TILE": "partitions per tile",
            "F_TILE": "elements per partition",
            "LOW": "offset of the first tap (-radius)",
        },
    }
    return p
