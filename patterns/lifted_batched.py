"""Lowering rule for batched matrix products over a lifted program, the contraction over every
column or causal (attention's weighted values, `P V`, over the keys up to the query):

    O[b.., m, n] = sum_{k (< m + 1)} A[.., m, .., k] * B[.., k, .., n]

with the batch coordinates (batch, head) indexing all three tensors anywhere (`out[b, t, h, e]`
from `att[b, h, t, k]` and the V rows of a packed `[B, T, 3, NH, hs]` tensor: 2 on its third
axis), A's contraction axis innermost, and B's output column axis innermost. On Trainium, per
batch entry and 128 rows of A: A's row blocks turned on the Tensor engine (the causal diagonal
block masked to 0 first), B's row blocks moving, the products accumulated in one PSUM bank;
causal rows stop at the tile's last row.
"""

from __future__ import annotations

from migrator.patterns.lifted import (
    _axis_of,
    _bind,
    _float32_only,
    _index_text,
    _lift_note,
    _NoFit,
    _Renderer,
    _tensor,
    _the_output,
    _unit_var,
)

from migrator.contract import TaskSpec
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.lift.program import Expr, Program
from migrator.plan import PMAX, Plan, note

MAX_COLS = 512  # output columns: one PSUM bank of fp32 per partition


def batched_matmul(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program)
    if len(a.vars) < 3:
        raise _NoFit("not a batch of matrices")
    e = a.expr
    if e.kind != "reduce" or e.op != "sum" or not e.var:
        raise _NoFit("not one sum of products")
    body = e.args[0]
    if not (body.kind == "op" and body.op == "*" and len(body.args) == 2
            and all(x.kind == "load" for x in body.args)):  # fmt: skip
        raise _NoFit("the sum is not over products of two tensor elements")
    out_axes = {v: j for j, v in enumerate(a.vars)}
    kv = e.var
    # the row coordinate is the one A and the output share that B lacks; the column the one
    # B and the output share that A lacks
    lhs, rhs = body.args
    if _axis_of(lhs, kv) != len(lhs.index) - 1:
        lhs, rhs = rhs, lhs
    if _axis_of(lhs, kv) != len(lhs.index) - 1:
        raise _NoFit("no operand has the contraction axis innermost")
    a_vars, b_vars = _vars(lhs), _vars(rhs)
    rows = [v for v in a_vars if v in out_axes and v not in b_vars]
    cols = [v for v in b_vars if v in out_axes and v not in a_vars]
    if len(rows) != 1 or len(cols) != 1:
        raise _NoFit("not one row coordinate in A and one column coordinate in B")
    m, n = rows[0], cols[0]
    batch = [v for v in a.vars if v not in (m, n)]
    if a.vars[-1] != n or _axis_of(rhs, n) != len(rhs.index) - 1:
        raise _NoFit("the output's column axis is not innermost in the output and in B")
    for ld, own in ((lhs, {m, kv}), (rhs, {n, kv})):
        used = [v for v in _vars(ld) if v not in own]
        if sorted(used) != sorted(batch):
            raise _NoFit(f"{ld.render()} does not read one matrix per batch entry")
    causal = e.upto is not None
    if causal and e.upto.render() != f"{m} + 1":  # (k < m + 1: up to the row's own column)
        raise _NoFit(f"a contraction range `k < {e.upto.render()}` other than the causal m + 1")
    p = _bind(tu, k, spec, "batched_matmul", "lifted")
    at_, bt_, out = _tensor(p, lhs.tensor), _tensor(p, rhs.tensor), _tensor(p, a.tensor)
    _float32_only((at_, bt_, out), "batched products are")
    out_spec = spec.tensor_named(a.tensor)
    for sset in spec.all_size_sets():
        cols_n = spec.shape_of(out_spec, sset)[-1]
        if cols_n > MAX_COLS:
            raise _NoFit(f"{cols_n} output columns (at {sset}): above {MAX_COLS} the "
                         "products need several PSUM banks, not emitted yet")  # fmt: skip
    r = _Renderer(p, spec, lambda ld: "")
    loops = {v: f"l{j}" for j, v in enumerate(batch)}
    a_at = _index_text(lhs, {**loops, m: "q0 : q0 + qr", kv: "k0 : k0 + kb"}, r)
    b_at = _index_text(rhs, {**loops, kv: "k0 : k0 + kb", n: ":"}, r)
    out_at = ", ".join({**loops, m: "q0 : q0 + qr", n: ":"}[v] for v in a.vars)
    row_extent = out.shape[out_axes[m]]
    k_extent = at_.shape[len(lhs.index) - 1]
    p.constants = {"P_TILE": PMAX}
    p.notes = {
        "turn": note(k.span, "A's rows of 128 contraction columns turned on the Tensor engine "
                     "(stationary), B's rows moving, products accumulated in PSUM"),
        "causal": note(k.span, "the contraction stops at the tile's last row; the diagonal "
                       "block's columns past each row are zeroed before the transpose"),
        "store": _lift_note(k, program),
    }  # fmt: skip
    p.fields.update({
        "summary": a.render(), "a": at_.name, "b": bt_.name, "out": out.var,
        "a_at": a_at, "b_at": b_at, "out_at": out_at,
        "loops": [(loops[v], out.shape[out_axes[v]]) for v in batch],
        "rows": row_extent, "k_len": k_extent, "cols": out.shape[-1], "causal": causal,
        "uses_isa": True,
        "constant_notes": {"P_TILE": "rows and contraction columns per tile (pmax)"},
    })  # fmt: skip
    return p


def _vars(ld: Expr) -> list[str]:
    return [u for ix in ld.index if (u := _unit_var(ix)) is not None]
