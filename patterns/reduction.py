"""Reductions: many values combined into one per block, per row, or into a global accumulator.

Styles recognised from the IR's reduction records: shared-memory trees (halving loops over a
``__shared__`` array with barriers), warp-shuffle trees (``__shfl_down/xor_sync``), atomics into a
global accumulator, and per-thread loop accumulation. What is reduced decides the variant:
``block_partial`` (one partial result per block: the first pass of a two-pass full reduction),
``axis`` (one result per row of a matrix), ``atomic_total`` (one global accumulator).
"""

from __future__ import annotations

from typing import Any

from migrator.patterns import facts
from migrator.patterns.registry import FamilyMatcher, MatchResult, Priority

from migrator import diagnostics as diag
from migrator.contract import TaskSpec
from migrator.cuda import poly
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.plan import ELEMENTWISE_FREE, MAX_ROW_FREE, PMAX, Plan, PlanError, bind, note


class ReductionMatcher(FamilyMatcher):
    family = "reduction"
    priority: Priority = "default"

    def plan(self, match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
        return plan_kernel(match, tu, k, spec)

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        styles = sorted({r.style for r in k.reductions})
        if not styles:
            return self.reject(k, "combines no values (no accumulator, tree, shuffle or atomic)")
        stores = facts.global_stores(k)
        atomics = [r for r in k.reductions if r.style == "atomic"]
        if not stores and atomics:
            target = atomics[0].target
            if any(
                not a.indices[0].affine or a.indices[0].variant
                for a in k.accesses
                if a.array == target and a.kind == "atomic"
            ):
                return self.reject(
                    k, f"atomics into {target} at a data-dependent index (histogram)"
                )
            return self.accept(
                k,
                variant="atomic_total",
                reasons=[
                    f"atomic {atomics[0].op} into {target}[0]: a global accumulator",
                    f"styles: {', '.join(styles)}",
                ],
                plan={"variant": "atomic_total", "output": target, "op": atomics[0].op},
            )
        if not stores:
            return self.reject(k, "writes no global memory")
        out = stores[-1]
        idx = out.index[0]
        # a rowwise normalisation writes whole rows after reducing; a reduction writes one value
        # per block/row, outside any column loop
        if out.loops:
            return self.reject(
                k,
                f"stores {out.array} inside loop(s) {out.loops}: it writes many "
                "values per reduced group (rowwise or stencil, not a reduction)",
            )
        axes = facts.axes(idx)
        op = _final_op(k)
        reasons = [f"reduction styles: {', '.join(styles)} ({op})"]
        if idx.affine and idx.canonical == "blockIdx.x" and _row_per_block(k):
            variant = "axis"
            reasons.append(
                f"one result per block: {out.array}[blockIdx.x], each block reading its row "
                "(the input's blockIdx.x stride is a size)"
            )
        elif idx.affine and idx.canonical == "blockIdx.x" and (why := _strided_across_blocks(k)):
            return self.reject(k, why)
        elif idx.affine and idx.canonical == "blockIdx.x":
            variant = "block_partial"
            reasons.append(
                f"one partial result per block: {out.array}[blockIdx.x] "
                "(first pass of a two-pass full reduction)"
            )
        elif idx.affine and axes <= {"x"} and any("floordiv" in s for s in idx.variant):
            variant = "axis"
            reasons.append(f"one result per warp-sized group: {out.array}[{idx.canonical}]")
        elif idx.affine and axes and not any("threadIdx" in s for s in idx.variant):
            variant = "axis"
            reasons.append(f"one result per block: {out.array}[{idx.canonical}]")
        else:
            return self.reject(k, f"result index {idx.canonical or idx.text} is not per block/row")
        thread_sel = [k.guards[g] for g in out.guards if k.guards[g].kind == "thread_select"]
        if thread_sel:
            reasons.append(f"written by one thread ({thread_sel[-1].condition})")
        loads = sorted({a.array for a in k.accesses if a.space == "global" and a.kind == "read"})
        return self.accept(
            k,
            variant=variant,
            reasons=reasons,
            plan={
                "variant": variant,
                "output": out.array,
                "inputs": loads,
                "op": op,
                "styles": styles,
            },
        )


def _epilogue(k: Kernel, p: Plan, output: str) -> str | None:
    """The arithmetic the kernel applies to the reduced value before storing it (a mean's
    `sum / cols`, a norm's `sqrtf(sum)`), rendered over a placeholder for the reduced tile;
    None when it stores the reduction itself. Anything that reads memory is not emitted."""
    from migrator import nkiexpr

    st = next((s for s in facts.global_stores(k) if s.array == output), None)
    if st is None:
        return None
    v = st.value
    while v.kind == "cast" and v.args:
        v = v.args[0]
    if v.kind == "reduce":
        return None
    red = next((n for n in v.walk() if n.kind == "reduce"), None)
    if red is None:
        return None

    def no_loads(ld: Any) -> str:
        raise nkiexpr.Untranslatable(f"the stored value also reads {ld.text}")

    try:
        return nkiexpr.render_epilogue(v, red, no_loads, p.params)
    except nkiexpr.Untranslatable as e:
        raise PlanError(diag.make("NOT_EMITTED", st.span, what=f"a reduction stored as "
                                  f"`{st.value.text}` ({e})")) from e  # fmt: skip


def _row_times_vector(k: Kernel, ins: list[Any]) -> str | None:
    """The vector of a matrix-vector row reduction (`sum += A[row*K + k] * x[k]`): the 1-D
    input read at the reduction variable alone, the other input a matrix read along its row."""
    matrix = [t for t in ins if len(t.shape) == 2]
    vec = [t for t in ins if len(t.shape) == 1]
    if len(matrix) != 1 or len(vec) != 1 or vec[0].shape[0] != matrix[0].shape[1]:
        return None
    for st in facts.global_stores(k):
        for node in st.value.walk():
            if node.kind != "binary" or node.op != "*" or len(node.args) != 2:
                continue
            a, b = node.args
            if not (a.kind == "load" and b.kind == "load"):
                continue
            by_param = {ld.name: ld for ld in (a, b)}
            m = by_param.get(matrix[0].param)
            v = by_param.get(vec[0].param)
            if m is None or v is None or not v.index or not m.index:
                continue
            vi, mi = v.index[0], m.index[0]
            loop_vars = {lp.var for lp in k.loops if lp.var}
            if vi.affine and len(vi.variant) == 1 and vi.variant[0] in loop_vars:
                kv = vi.variant[0]
                if mi.affine and poly.coefficient_of(mi.as_poly(), kv) == {(): 1}:
                    return vec[0].name
    return None


def _row_per_block(k: Kernel) -> bool:
    """Each block reduces one row: global reads advance by a problem size per block
    (`in[blockIdx.x * cols + c]`), not by a constant block extent (`in[blockIdx.x * 512 + t]`)."""
    sizes = {p.name for p in k.params if p.role == "scalar"}  # not template constants
    reads = [a for a in k.accesses if a.space == "global" and a.kind == "read" and a.indices]
    for a in reads:
        idx = a.indices[0]
        if idx.affine and poly.symbols(poly.coefficient_of(idx.as_poly(), "blockIdx.x")) & sizes:
            return True
    return False


def _final_op(k: Kernel) -> str:
    ops = {r.op for r in k.reductions}
    return ops.pop() if len(ops) == 1 else "+".join(sorted(ops))


def plan_kernel(match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """Reduced groups on partitions, each group's elements along the free axis, one
    free-axis reduction instruction per tile (the CUDA tree/shuffle has no NKI counterpart)."""
    info = match.plan or {}
    p = bind(tu, k, spec, "reduction", match.variant)
    out = p.tensor_for_param(info["output"])
    ins = [t for t in (p.tensor_for_param(a) for a in info.get("inputs", [])) if t is not None]
    vector = None
    if match.variant == "axis" and len(ins) == 2 and info["op"] == "sum" and out is not None:
        vector = _row_times_vector(k, ins)  # gemv: sum_k A[row, k] * x[k]
        if vector is not None:
            ins = [t for t in ins if t.name != vector]
    if out is None or (len(ins) != 1 and match.variant != "atomic_total"):
        raise PlanError(
            diag.make("NOT_EMITTED", k.span, what="a reduction with other than one input tensor")
        )
    if match.variant == "atomic_total":
        return _plan_atomic_total(match, tu, k, p, out)
    x = ins[0]
    if info["op"] not in ("sum", "max", "min"):
        raise PlanError(diag.make("NOT_EMITTED", k.span, what=f"a {info['op']} reduction"))
    red = k.reductions[0]
    p.notes = {
        "reduce": note(
            red.span,
            f"{red.style} {red.op} reduction becomes one nl.{info['op']} along the free axis",
        ),
    }
    fields: dict[str, Any] = {
        "variant": match.variant,
        "x": x.name,
        "out": out.var,
        "op": info["op"],
        "vector": vector,
        "epilogue": _epilogue(k, p, info["output"]),
    }
    if match.variant == "block_partial":
        chunk = _elements_per_block(k)
        if chunk is None:
            raise PlanError(
                diag.make(
                    "NOT_EMITTED",
                    k.span,
                    what="a per-block reduction whose block extent is not a compile-time constant",
                )
            )
        p.constants = {"P_TILE": PMAX, "CHUNK": chunk}
        fields.update(n=x.shape[0], groups=out.shape[0])
        fields["constant_notes"] = {
            "P_TILE": "reduced groups per tile, one per partition",
            "CHUNK": "elements one CUDA block reduces (its partial sum)",
        }
    elif match.variant == "axis" and len(x.shape) == 2:
        p.constants = {"P_TILE": PMAX, "MAX_ROW": MAX_ROW_FREE}
        fields.update(rows=x.shape[0], cols=x.shape[1])
        fields["constant_notes"] = {
            "P_TILE": "rows per tile, one per partition",
            "MAX_ROW": "longest row reduced in one instruction",
        }
    else:
        raise PlanError(diag.make("NOT_EMITTED", k.span, what=f"a {match.variant} reduction"))
    p.fields = fields
    return p


def _strided_across_blocks(k: Kernel) -> str | None:
    """Block partials read one contiguous chunk per block; `in[blockIdx.x + i * 256]` reads a
    column per block instead (blockIdx.x steps by less than another index does)."""
    for a in k.accesses:
        if a.space != "global" or a.kind != "read" or not a.indices[0].affine:
            continue
        p = a.indices[0].as_poly()
        b = poly.coefficient_of(p, "blockIdx.x")
        if not b or poly.constant_value(b) is None:
            continue
        for sym in sorted(poly.symbols(p) - {"blockIdx.x"}):
            c = poly.coefficient_of(p, sym)
            cv = poly.constant_value(c) if c else None
            if sym in a.indices[0].variant and (
                (cv is not None and abs(cv) > abs(poly.constant_value(b)))  # type: ignore[arg-type]
                or (cv is None and c)
            ):
                return (
                    f"each block reads {a.array} with stride {poly.render(c)} along {sym} but "
                    f"only {poly.render(b)} between blocks: a strided (column) reduction, not "
                    "one contiguous chunk per block"
                )
    return None


def _elements_per_block(k: Kernel) -> int | None:
    """How many input elements one block reduces: the blockIdx.x stride of its loads."""
    tparams = [t.name for t in k.template_params if t.kind == "value"]
    inst = k.instantiations[0] if k.instantiations else []
    values = {}
    for name, text in zip(tparams, inst, strict=False):
        try:
            values[name] = int(text.rstrip("uUlL"), 0)
        except ValueError:
            return None
    for a in k.accesses:
        if a.space == "global" and a.kind == "read" and a.indices[0].affine:
            stride = poly.coefficient_of(a.indices[0].as_poly(), "blockIdx.x")
            if stride and poly.symbols(stride) <= set(values):
                return poly.evaluate(stride, values)
    return None


def _plan_atomic_total(
    match: MatchResult, tu: TranslationUnit, k: Kernel, p: Plan, out: Any
) -> Plan:
    """A global accumulator: per-partition partial sums over 1-D tiles, then one matmul with a
    ones vector reduces across partitions (the Tensor engine is the cross-partition adder)."""
    from migrator import nkiexpr

    term = None
    for st in k.stores:
        v = st.value
        if v.kind == "reduce" and v.style == "loop_accumulate" and v.op == "sum" and v.args:
            term = v.args[-1]
            break
    if term is None or out.role != "inout":
        raise PlanError(diag.make("NOT_EMITTED", k.span, what="an atomic total whose per-element "
                                  "term is not a loop accumulation"))  # fmt: skip
    loads: dict[str, str] = {}

    def tile_of(ld: Any) -> str:
        t = p.tensor_for_param(ld.name or "")
        if t is None or len(t.shape) != 1:
            raise nkiexpr.Untranslatable(f"{ld.name} is not a 1-D tensor of the task")
        loads.setdefault(t.name, f"{t.name}_tile")
        return loads[t.name]

    try:
        expr = nkiexpr.render(term, tile_of, p.params)
    except nkiexpr.Untranslatable as e:
        raise PlanError(diag.make("NOT_EMITTED", k.span, what=str(e))) from e
    first = p.tensor_for_param(next(iter(_params_of(term))))
    red = next(r for r in k.reductions if r.style == "atomic")
    p.constants = {"P_TILE": PMAX, "F_TILE": ELEMENTWISE_FREE}
    p.notes = {
        "reduce": note(
            red.span,
            "atomicAdd into a global accumulator: per-partition sums, "
            "then a ones-vector matmul across partitions",
        ),  # fmt: skip
    }
    p.fields = {
        "variant": "atomic_total", "term": expr, "loads": loads, "n": first.shape[0] if first
        else "?", "out": out.var, "out_in": out.name, "op": "sum",
        "constant_notes": {"P_TILE": "partitions per tile", "F_TILE": "elements per partition"},
    }  # fmt: skip
    return p


def _params_of(e: Any) -> list[str]:
    return [n.name for n in e.walk() if n.kind == "load" and n.name]
