"""Matrix multiply: a sum over k of products of two operands, one output element per thread.

Found from the dataflow: a store whose value contains a sum-reduction whose term is the product of
two loads. Loads from shared tiles are followed back to the global loads that filled them
(shared-memory tiled GEMM). Each operand's layout comes from its index: the coefficient of the
reduction variable says whether k runs along the row (``A[row*K + k]``: row-major A) or down
the column (``A[k*M + row]``: A transposed). ``alpha * acc + beta * C`` epilogues and batched
launches (``blockIdx.z``) are recognised.
"""

from __future__ import annotations

from typing import Any

from migrator.patterns import facts
from migrator.patterns.registry import FamilyMatcher, MatchResult, Priority

from migrator import diagnostics as diag
from migrator import nkiexpr
from migrator.contract import TaskSpec
from migrator.cuda import poly
from migrator.cuda.ir import Expr, IndexExpr, Kernel, Store, TranslationUnit
from migrator.nkiexpr import CONVERSIONS, Untranslatable
from migrator.plan import (
    MOVING_FMAX,
    PMAX,
    STATIONARY_FMAX,
    Plan,
    PlanError,
    bind,
    note,
    source_line,
)


class MatmulMatcher(FamilyMatcher):
    family = "matmul"
    priority: Priority = "default"

    def plan(self, match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
        return plan_kernel(match, tu, k, spec)

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        for st in facts.global_stores(k):
            found = _product_reduction(st.value)
            if found is None:
                continue
            red, a, b = found
            ops = [_operand(k, x) for x in (a, b)]
            if any(o is None for o in ops):
                return self.reject(
                    k,
                    "the product's operands are not loads of global matrices "
                    "(directly or through shared tiles)",
                )
            (a_name, a_idx, a_via), (b_name, b_idx, b_via) = ops  # type: ignore[misc]
            kvars = _reduction_vars(k, red, a_idx, b_idx)
            if not kvars:
                return self.reject(k, "no reduction variable is shared by both operands' indices")
            a_lay = _layout(a_idx, kvars, "y")
            b_lay = _layout(b_idx, kvars, "x")
            if a_lay is None or b_lay is None:
                return self.reject(
                    k,
                    f"operand layouts not recognised ({a_name}: {a_idx.canonical};"
                    f" {b_name}: {b_idx.canonical})",
                )
            variant = "shared_tiled" if (a_via or b_via) else "naive"
            if k.local_arrays:
                variant = "register_blocked"
            epilogue = _epilogue(st, red)
            batched = any("blockIdx.z" in s for s in st.index[0].variant)
            reasons = [
                f"stores {st.array}[{st.index[0].canonical}] = {epilogue['form']}",
                f"sum over {', '.join(kvars)} of {a_name} * {b_name}"
                + (f" (through shared tiles {a_via}, {b_via})" if a_via or b_via else ""),
                f"{a_name} is {a_lay}, {b_name} is {b_lay}",
            ]
            if batched:
                reasons.append("batched over blockIdx.z")
            return self.accept(
                k,
                variant=variant,
                reasons=reasons,
                plan={
                    "variant": variant,
                    "a": a_name,
                    "b": b_name,
                    "c": st.array,
                    "a_layout": a_lay,
                    "b_layout": b_lay,
                    # a general epilogue is rendered whole (alpha and beta inside it)
                    "alpha": epilogue["alpha"] if epilogue["mapped"] else None,
                    "beta": epilogue["beta"] if epilogue["mapped"] else None,
                    "batched": batched,
                    "k_vars": kvars,
                    "epilogue": None if epilogue["mapped"] else epilogue["form"],
                },
            )
        return self.reject(k, "no store of a sum of products (no matmul accumulation)")


def _product_reduction(e: Expr) -> tuple[Expr, Expr, Expr] | None:
    """The outermost sum-reduce whose innermost term is ``x * y`` (nested reduces allowed)."""
    for node in e.walk():
        if node.kind != "reduce" or node.op != "sum":
            continue
        term = node.args[-1]
        while term.kind == "reduce" and term.op == "sum":
            term = term.args[-1]
        if term.kind == "binary" and term.op == "*":
            a, b = term.args
            if _is_load(a) and _is_load(b):
                return node, _strip(a), _strip(b)
    return None


def _strip(e: Expr) -> Expr:
    """The value under casts and 16-bit conversions (`__bfloat162float(A[i])` is a load)."""
    while e.args and (e.kind == "cast" or (e.kind == "call" and e.op in CONVERSIONS)):
        e = e.args[0]
    return e


def _is_load(e: Expr) -> bool:
    return _strip(e).kind == "load"


def _operand(k: Kernel, load: Expr) -> tuple[str, IndexExpr, str | None] | None:
    """(global array, its index, shared tile it came through) for one product operand."""
    if load.space == "global":
        return load.name or "?", load.index[0], None
    if load.space != "shared":
        return None
    fills = [s for s in k.stores if s.array == load.name]
    for st in fills:
        src = st.value
        if src.kind == "select":  # zero-filled ragged edges: cond ? A[...] : 0
            src = next((a for a in src.args[1:] if _is_load(a)), src)
        src = _strip(src)
        if src.kind == "load" and src.space == "global":
            return src.name or "?", src.index[0], load.name
    return None


def _reduction_vars(k: Kernel, red: Expr, a: IndexExpr, b: IndexExpr) -> list[str]:
    loop_vars = {lp.var for lp in k.loops if lp.var}
    shared = set(a.variant) & set(b.variant) & loop_vars
    return sorted(shared)


def _layout(idx: IndexExpr, kvars: list[str], out_axis: str) -> str | None:
    """Storage order of one operand, from which of its two index parts carries a size stride.

    For A (rows follow the output's y axis): rows strided by a size (``row*lda + k``) is
    row-major ``[M, K]``; k strided by a size (``k*M + row``) is A stored transposed ``[K, M]``.
    For B (columns follow x): ``k*ldb + col`` is row-major ``[K, N]``; ``col*K + k`` is B stored
    transposed ``[N, K]``.
    """
    if not idx.affine:
        return None
    p = idx.as_poly()
    axis = poly.coefficient_of(p, f"threadIdx.{out_axis}")
    k_coeff = next((c for c in (poly.coefficient_of(p, v) for v in kvars) if c), None)
    if not axis or k_coeff is None:
        return None

    def sized(c: poly.Poly) -> bool:  # multiplied by a problem size (K, lda, N ...)
        return any(m for m in c)

    if out_axis == "y":
        if sized(axis) and not sized(k_coeff):
            return "row-major [M, K]"
        if sized(k_coeff) and not sized(axis):
            return "transposed (stored [K, M])"
    else:
        if sized(k_coeff) and not sized(axis):
            return "row-major [K, N]"
        if sized(axis) and not sized(k_coeff):
            return "transposed (stored [N, K])"
    return None


def _epilogue(st: Store, red: Expr) -> dict[str, object]:
    v = st.value
    alpha = beta = None
    if v.kind == "binary" and v.op == "+":
        left, right = v.args
        if (
            right.kind == "binary"
            and right.op == "*"
            and any(a.kind == "load" and a.name == st.array for a in right.args)
        ):
            beta = next((a.name for a in right.args if a.kind == "param"), None)
            v = left
    if v.kind == "binary" and v.op == "*" and any(a is red or a == red for a in v.args):
        alpha = next((a.name for a in v.args if a.kind == "param"), None)
    if alpha:
        v = next(a for a in v.args if a.kind != "param")
    while v.kind == "cast" and v.args:
        v = v.args[0]
    form = "acc"
    if alpha:
        form = f"{alpha} * acc"
    if beta:
        form += f" + {beta} * {st.array}"
    # anything else around the sum (bias, activation, clamping) is rendered in full by the
    # planner (`_general_epilogue`), or reported there: never the bare accumulator
    mapped = v is red or v == red
    return {"alpha": alpha, "beta": beta, "form": form if mapped else st.value.text,
            "mapped": mapped}  # fmt: skip


def plan_kernel(match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """PSUM accumulation over K tiles: A^T tiles stationary (via a TensorE transpose when A is
    row-major), B tiles moving, one [TILE_M, TILE_N] PSUM bank per output tile."""
    info = match.plan or {}
    p = bind(tu, k, spec, "matmul", match.variant)
    p.avoid_names(MATMUL_LOCALS)
    a, b, c = (p.tensor_for_param(info[x]) for x in ("a", "b", "c"))
    if a is None or b is None or c is None:
        raise PlanError(
            diag.make(
                "NOT_EMITTED", k.span, what="matmul operands that are not tensors of the task"
            )
        )
    batched = bool(info.get("batched"))
    if not batched and not (len(a.shape) == len(b.shape) == len(c.shape) == 2):
        raise PlanError(diag.make("NOT_EMITTED", k.span, what="a matmul whose tensors are not "
                                  "matrices in the task (flat arrays)"))  # fmt: skip
    if batched and not (len(a.shape) == len(b.shape) == len(c.shape) == 3):
        raise PlanError(diag.make("NOT_EMITTED", k.span, what="a batched matmul whose tensors "
                                  "are not [batch, rows, cols]"))  # fmt: skip
    epilogue: dict[str, Any] | None = None
    if info.get("epilogue"):
        st = next(s for s in facts.global_stores(k) if s.array == info["c"])
        try:
            epilogue = _general_epilogue(p, st)
        except Untranslatable as e:
            raise PlanError(diag.make("NOT_EMITTED", st.span, what=f"a matmul epilogue other "
                                      f"than alpha * acc + beta * C: `{info['epilogue']}` "
                                      f"({e})")) from e  # fmt: skip
    if batched:  # plan on the matrices of one batch; the template adds the batch index
        a, b, c = (t.model_copy(update={"shape": t.shape[1:]}) for t in (a, b, c))
        batch = p.tensor_for_param(info["c"]).shape[0]  # type: ignore[union-attr]
    a_transposed = info["a_layout"].startswith("transposed")
    b_transposed = info["b_layout"].startswith("transposed")
    st = next(s for s in facts.global_stores(k) if s.array == info["c"])
    red = next((r for r in k.reductions if r.style == "loop_accumulate"), None)
    # a transposed B ([N, K]) is turned on the Tensor engine, at most 128 columns at a time
    p.constants = {"TILE_M": STATIONARY_FMAX, "TILE_K": PMAX,
                   "TILE_N": PMAX if b_transposed else MOVING_FMAX}  # fmt: skip
    m_size, k_size = (a.shape[1], a.shape[0]) if a_transposed else (a.shape[0], a.shape[1])
    n_size = b.shape[0] if b_transposed else b.shape[1]
    p.notes = {
        "acc": note(
            red.span if red else st.span,
            "the per-thread accumulator becomes a PSUM tile, accumulated over K tiles",
        ),
        "a": note(
            st.span,
            f"{a.name} is {info['a_layout']}: "
            + (
                "loaded as A^T directly"
                if a_transposed
                else "row-major tiles are transposed on the Tensor engine"
            ),
        ),
        "store": note(st.span, source_line(st.span)),
        "guard": "ragged edges: masked loads into zeroed tiles, masked stores",
    }
    alpha = p.params.get(info["alpha"]) if info.get("alpha") else None
    beta = p.params.get(info["beta"]) if info.get("beta") else None
    p.fields = {
        "a": a.name,
        "b": b.name,
        "c_in": c.name if c.role == "inout" else None,
        "out": c.var,
        "M": m_size,
        "K": k_size,
        "N": n_size,
        "a_transposed": a_transposed,
        "b_transposed": b_transposed,
        "batch": batch if batched else None,
        "alpha": alpha,
        "beta": beta,
        "epilogue": epilogue["expr"] if epilogue else None,
        "epilogue_loads": epilogue["loads"] if epilogue else [],
        "epilogue_pre": epilogue["pre"] if epilogue else [],
        # a general epilogue reads the PSUM accumulator itself (its first op is the copy out of
        # PSUM); alpha/beta, or no arithmetic at all, start from an SBUF copy `res`
        "epilogue_from": "acc"
        if epilogue and not alpha and not beta and epilogue["expr"] != nkiexpr.ACC
        else "res",
        "dtype": a.nl_dtype,
        "constant_notes": {
            "TILE_M": "output rows per tile = stationary free size (gemm_stationary_fmax)",
            "TILE_K": "contraction per matmul = partitions (pmax)",
            "TILE_N": "output columns per tile = moving free size = one PSUM bank of fp32",
        },
    }
    return p


# names the matmul templates (both dialects) use for their own locals
MATMUL_LOCALS = frozenset({
    "acc", "res", "out_tile", "c_tile", "a_t", "a_tile", "b_tile", "bt_tile", "a_flip", "b_flip",
    "i_m", "i_n", "i_k", "i_kf", "i_kp", "i_np", "i_kf2", "i_mo", "i_no", "out_ok", "m", "n", "k",
    "m0", "n0", "k0", "ms", "ns", "ks", "bt", "TILE_M", "TILE_N", "TILE_K", "tm", "tn", "tk",
    "pre_clamp",
})  # fmt: skip


def _general_epilogue(p: Plan, st: Store) -> dict[str, Any]:
    """An epilogue around the sum (`fmaxf(acc + bias[col], 0.0f)`) rendered as nl math over the
    accumulator tile, with the tensors it reads loaded per output tile: row vectors indexed by
    the output column ([1, TILE_N]), column vectors indexed by the row ([TILE_M, 1]), or tiles
    at the output element itself."""
    found = _product_reduction(st.value)
    if found is None:
        raise Untranslatable("the sum is not found in the stored value")
    red = found[0]
    out_index = st.index[0].canonical
    col_index, row_index = _column_and_row(st.index[0])
    loads: dict[str, dict[str, str]] = {}

    def tile_of(ld: Expr) -> str:
        t = p.tensor_for_param(ld.name or "")
        if t is None or ld.space != "global" or not ld.index:
            raise Untranslatable(f"{ld.text} is not a tensor of the task")
        idx = ld.index[0]
        if idx.canonical == out_index:
            kind = "same"
        elif len(t.shape) == 1 and idx.affine and idx.as_poly() == col_index:
            kind = "row"  # indexed by the output column: broadcast down the rows
        elif len(t.shape) == 1 and idx.affine and row_index and idx.as_poly() == row_index:
            kind = "col"  # indexed by the output row: broadcast along the columns
        else:
            raise Untranslatable(f"{ld.text} is neither the output element nor a row/column "
                                 "vector of it")  # fmt: skip
        entry = loads.setdefault(t.name, {"tensor": t.name, "var": f"{t.name}_epi",
                                          "kind": kind})  # fmt: skip
        if entry["kind"] != kind:
            raise Untranslatable(f"{t.name} is read at two different indices")
        return entry["var"]

    pre: list[dict[str, str]] = []

    def bind(source: str) -> str:
        name = f"pre_clamp{len(pre)}" if pre else "pre_clamp"
        pre.append({"var": name, "expr": source})
        return name

    expr = nkiexpr.render_epilogue(st.value, red, tile_of, p.params, bind=bind)
    return {"expr": expr, "loads": list(loads.values()), "pre": pre}


def _column_and_row(idx: IndexExpr) -> tuple[poly.Poly, poly.Poly | None]:
    """The output column (the x-axis terms of `row * ldc + col`) and row (the y-axis terms
    divided by their stride), as polynomials a vector's index must equal exactly."""
    if not idx.affine:
        return {}, None
    out = idx.as_poly()
    xs = {m: c for m, c in out.items() if any(s.endswith(".x") for s in m)}
    ys = {m: c for m, c in out.items() if any(s.endswith(".y") for s in m)}
    stride = poly.coefficient_of(out, "threadIdx.y")
    row: poly.Poly | None = None
    if stride and ys:
        row = {}
        for m, c in ys.items():  # divide each y term by the stride monomial(s)
            (sm, sc), *rest = stride.items()
            if rest or c % sc or not set(sm) <= set(m):
                return xs, None
            left = list(m)
            for sym in sm:
                left.remove(sym)
            row[tuple(left)] = c // sc
    return xs, row
