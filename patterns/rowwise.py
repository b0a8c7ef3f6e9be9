"""Row-wise normalisations: reduce a row (max, sum, sum of squares), then map over the same row.

Recognises softmax, log-softmax, layernorm and rmsnorm kernels written with one block (or one
warp) per row: block- or warp-stride loops over the columns, shared-memory or shuffle reductions,
then a store of the whole row. The variant comes from the math of the final map.
"""

from __future__ import annotations

from migrator.patterns import facts
from migrator.patterns.registry import FamilyMatcher, MatchResult, Priority

from migrator import diagnostics as diag
from migrator.contract import TaskSpec
from migrator.cuda import poly
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.plan import (
    BN_STATS_FMAX,
    MAX_ROW_FREE,
    PMAX,
    Plan,
    PlanError,
    bind,
    note,
    source_line,
)


class RowwiseMatcher(FamilyMatcher):
    family = "rowwise"
    priority: Priority = "default"

    def plan(self, match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
        return plan_kernel(match, tu, k, spec)

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        if not k.reductions:
            return self.reject(k, "reduces nothing before its map")
        stores = [s for s in facts.global_stores(k) if s.loops]
        if not stores:
            return self.reject(k, "does not write its output inside a loop over a row")
        st = stores[-1]
        loop = k.loops[st.loops[-1]]
        if loop.kind not in ("block_stride", "thread_dependent", "counted") or loop.var is None:
            return self.reject(
                k,
                f"the output loop #{loop.id} is {loop.kind}, not a loop over the columns",
            )
        idx = st.index[0]
        if not idx.affine or poly.coefficient_of(idx.as_poly(), loop.var) != {(): 1}:
            return self.reject(
                k,
                f"{st.array} is written at {idx.canonical or idx.text}, not at "
                f"row*cols + {loop.var}",
            )
        row = poly.sub(idx.as_poly(), poly.sym(loop.var))
        row_syms = poly.symbols(row)
        per_thread_row = loop.kind == "counted"  # one thread walks a whole row
        if not per_thread_row and any("threadIdx" in s and "floordiv" not in s for s in row_syms):
            return self.reject(k, "the row offset depends on the thread within the row")
        if per_thread_row and not any("threadIdx" in s for s in row_syms):
            return self.reject(k, "a counted column loop, but every thread gets the same row")
        ops = {r.op for r in k.reductions}
        math = facts.calls(st.value)
        loads = facts.loads(st.value, space="global")
        row_input = next((ld for ld in loads if facts.key(ld.index[0]) == facts.key(idx)), None)
        vectors = sorted(
            {
                ld.name or "?"
                for ld in loads
                if ld.index[0].affine and ld.index[0].variant == [loop.var]
            }
        )
        reasons = [
            f"writes {st.array}[{idx.canonical}]: row offset {poly.render(row)}, columns by "
            f"{loop.kind} loop #{loop.id} over {loop.var}",
            f"reductions before the map: {', '.join(sorted(ops))} "
            f"({', '.join(sorted({r.style for r in k.reductions}))})",
        ]
        if row_input is None:
            return self.reject(k, "the map does not read the input row at the output index")
        variant = _variant(ops, math, vectors)
        if variant is None:
            return self.reject(
                k,
                f"math {sorted(math)} with reductions {sorted(ops)} is not a "
                "softmax, log-softmax, layernorm or rmsnorm",
            )
        reasons.append(
            f"{variant}: map uses {', '.join(sorted(math))}"
            + (f"; per-column vectors {', '.join(vectors)}" if vectors else "")
        )
        scalars = [p.name for p in k.params if p.role == "scalar"]
        eps = next((p for p in scalars if p.lower().startswith("eps")), None)
        return self.accept(
            k,
            variant=variant,
            reasons=reasons,
            plan={
                "variant": variant,
                "input": row_input.name,
                "output": st.array,
                "row_offset": poly.render(row),
                "column_var": loop.var,
                "vectors": vectors,
                "eps": eps,
            },
        )


def _variant(ops: set[str], math: set[str], vectors: list[str]) -> str | None:
    exp = bool(math & {"expf", "exp", "__expf"})
    log = bool(math & {"logf", "log", "__logf"})
    rsqrt = bool(math & {"rsqrtf", "rsqrt", "sqrtf", "sqrt"})
    if "max" in ops and log:
        return "log_softmax"
    if "max" in ops and exp:
        return "softmax"
    if rsqrt and "sum" in ops:
        return "layernorm" if len(vectors) >= 2 else "rmsnorm" if len(vectors) <= 1 else None
    return None


def plan_kernel(match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """Rows on partitions (P_TILE rows per tile), each whole row along the free axis."""
    info = match.plan or {}
    p = bind(tu, k, spec, "rowwise", match.variant)
    x = p.tensor_for_param(info["input"])
    out = p.tensor_for_param(info["output"])
    if x is None or out is None or len(x.shape) != 2:
        raise PlanError(
            diag.make(
                "NOT_EMITTED",
                k.span,
                what="a row-wise kernel whose input is not a 2-D tensor of the task",
            )
        )
    st = next(s for s in facts.global_stores(k) if s.array == info["output"])
    scale = shift = None
    for node in st.value.walk():
        if node.kind != "binary" or node.op not in ("*", "+"):
            continue
        for a in node.args:
            if a.kind == "load" and a.name in info["vectors"]:
                if node.op == "*":
                    scale = a.name
                else:
                    shift = a.name
    vec = {"scale": scale, "shift": shift}
    vec_args = {role: p.tensor_for_param(param) for role, param in vec.items() if param}
    eps = p.params.get(info["eps"]) if info.get("eps") else None
    if match.variant in ("layernorm", "rmsnorm") and eps is None:
        raise PlanError(
            diag.make(
                "NOT_EMITTED",
                k.span,
                what=f"a {match.variant} whose epsilon is no scalar parameter",
            )
        )
    others = [t.name for t in spec.outputs_in_order if t.cuda_param != info["output"]]
    if others:  # (the row-wise templates store one output: the lifted program says the rest)
        raise PlanError(
            diag.make(
                "NOT_EMITTED",
                k.span,
                what=f"a row-wise kernel that also writes {', '.join(others)}",
            )
        )
    reds = {r.op: r for r in k.reductions}
    p.constants = {"P_TILE": PMAX, "MAX_ROW": MAX_ROW_FREE}
    if match.variant == "layernorm":
        p.constants["BN_FMAX"] = BN_STATS_FMAX
    loop = k.loops[st.loops[-1]]
    # a row loop bounded by another size than the row's width (`c < V` over rows of P >= V):
    # the template would reduce whole rows
    sized = {sc.cuda_param: str(sc.size) for sc in spec.scalars if sc.size is not None}
    bound = loop.bound.text.strip() if loop.bound is not None else ""
    x_spec = next((t for t in spec.tensors if t.cuda_param == info["input"]), None)
    if x_spec is not None and bound in sized and sized[bound] != str(x_spec.shape[-1]):
        raise PlanError(diag.make("NOT_EMITTED", k.span, what=f"rows of {sized[bound]} "
                                  "elements within wider ones"))  # fmt: skip
    p.notes = {
        "rows": note(
            k.span,
            f"one CUDA {_unit(info['row_offset'])} per row (row offset {info['row_offset']})",
        ),
        "cols": note(loop.span, f"{loop.kind} loop over {loop.var} becomes the free axis"),
        "max": note(reds["max"].span, f"row max ({reds['max'].style})") if "max" in reds else "",
        "sum": note(reds["sum"].span, f"row sum ({reds['sum'].style})") if "sum" in reds else "",
        "store": note(st.span, source_line(st.span)),
    }
    p.fields = {
        "variant": match.variant,
        "x": x.name,
        "out": out.var,
        "rows": x.shape[0],
        "cols": x.shape[1],
        "scale": vec_args["scale"].name if vec_args.get("scale") else None,
        "shift": vec_args["shift"].name if vec_args.get("shift") else None,
        "eps": eps,
        "uses_isa": match.variant in ("layernorm", "rmsnorm", "log_softmax"),
        "constant_notes": {
            "P_TILE": "rows per tile, one per partition (nl.tile_size.pmax)",
            "MAX_ROW": "longest row kept whole on a partition (32 KiB fp32)",
            "BN_FMAX": "bn_stats free-size limit (nl.tile_size.bn_stats_fmax)",
        },
    }
    return p


def _unit(row_offset: str) -> str:
    if "floordiv" in row_offset:
        return "warp"
    return "thread" if "threadIdx" in row_offset else "block"
