"""Lowering rule for attention scores over a lifted program (a batched, scaled Q K^T, causal or
not), whatever its CUDA spelling:

    S[b.., m, n] = (n > m ? c : s * sum_k Q[.., m, .., k] * K[.., n, .., k])

with the batch coordinates (batch, head) indexing both operands anywhere, fixed indices among
them (Q and K rows of one packed `[B, T, 3, NH, hs]` tensor: 0 and 1 on the third axis), the
contraction axis innermost in both, and `s` a product of constants, parameters and size
expressions (`1 / sqrt(C / NH)`). On Trainium, per batch entry: K^T resident in SBUF (128-key
row blocks turned on the Tensor engine), per 128 queries Q^T stationary and the scores of 512
keys per matmul in one PSUM bank, scaled on the way out; causal programs compute only the keys
up to the tile's last query, mask the diagonal tiles with an affine select and store the
constant in the tiles above them.
"""

from __future__ import annotations

from typing import Any

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
from migrator.lift.program import Expr, Program, value_of
from migrator.plan import PMAX, Plan, note

KEY_TILE = 512  # keys per score matmul: one 2 KiB PSUM bank of fp32 per partition


def scores(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program)
    if len(a.vars) < 2:
        raise _NoFit("the output is not a matrix (or a batch of them)")
    *batch, m, n = a.vars
    e, masked = a.expr, None
    if e.kind == "op" and e.op == "select":
        lhs, rhs, fill, e = e.args
        if not (a.expr.name == ">" and fill.kind == "const" and _coord(lhs) == n
                and _coord(rhs) == m):  # fmt: skip
            raise _NoFit("a mask other than the causal `key > query`")
        masked = fill.value
    factors = e.args if e.kind == "op" and e.op == "*" else [e]
    sums = [f for f in factors if f.kind == "reduce"]
    scale = [f for f in factors if f.kind != "reduce"]
    if len(sums) != 1 or sums[0].op != "sum" or sums[0].upto is not None:
        raise _NoFit("not one sum over a contraction axis (times a scale)")
    if any(x.kind in ("load", "coord") for f in scale for x in f.walk()):
        raise _NoFit("a factor outside the sum reads a tensor")
    red = sums[0]
    body = red.args[0]
    if not (body.kind == "op" and body.op == "*" and len(body.args) == 2
            and all(x.kind == "load" for x in body.args)):  # fmt: skip
        raise _NoFit("the sum is not over products of two tensor elements")
    q_ld, k_ld = body.args
    if _axis_of(q_ld, n) is not None or _axis_of(k_ld, m) is not None:
        q_ld, k_ld = k_ld, q_ld  # (the factors in the kernel's order: K first)
    kv = red.var or ""
    _operand(q_ld, m, kv, batch)
    _operand(k_ld, n, kv, batch)
    p = _bind(tu, k, spec, "scores", "lifted")
    q_t, k_t, out = _tensor(p, q_ld.tensor), _tensor(p, k_ld.tensor), _tensor(p, a.tensor)
    _float32_only((q_t, k_t, out), "scores are")
    head_axis = len(q_ld.index) - 1
    for sset in spec.all_size_sets():
        d = int(value_of(spec.shape_of(spec.tensor_named(q_ld.tensor),
                                       sset)[head_axis], sset))  # fmt: skip
        if d > PMAX:
            raise _NoFit(f"a head dim of {d} (at {sset}): above {PMAX} the contraction needs "
                         "several partition tiles, not emitted yet")  # fmt: skip
    r = _Renderer(p, spec, lambda ld: "")
    loops = {v: f"l{j}" for j, v in enumerate(batch)}
    q_at = _index_text(q_ld, {**loops, m: "q0 : q0 + qr", kv: ":"}, r)
    k_at = _index_text(k_ld, {**loops, n: "b0 : b0 + kb", kv: ":"}, r)
    nb = len(batch)
    p.constants = {"P_TILE": PMAX, "KEY_TILE": KEY_TILE}
    p.notes = {
        "resident": note(k.span, "K^T (turned on the Tensor engine) stays in SBUF for every "
                         "query tile of its batch entry"),
        "scores": note(k.span, "scores for KEY_TILE keys per matmul (Q^T stationary, "
                       "contraction over the head dim on the partitions), scaled out of PSUM"),
        "causal": note(k.span, "keys after the tile's last query are the mask's constant: not "
                       "computed; diagonal tiles masked by an affine select"),
        "store": _lift_note(k, program),
    }  # fmt: skip
    p.fields.update({
        "summary": a.render(), "q_at": q_at, "k_at": k_at, "out": out.var,
        "q_at_tensor": q_t.name, "k_at_tensor": k_t.name,
        "out_at": ", ".join([*loops.values(), "q0 : q0 + qr", "k0 : k0 + kw"]),
        "fill_at": ", ".join([*loops.values(), "q0 : q0 + qr", "f0 : f0 + fw"]),
        "loops": [(loops[v], out.shape[j]) for j, v in enumerate(batch)],
        "query_len": out.shape[nb], "key_len": out.shape[nb + 1],
        "head": q_t.shape[head_axis],
        "scale": " * ".join(r.convert(f).text for f in scale) or None,
        "causal": masked is not None,
        "masked": _literal(masked),
        "uses_isa": True,
        "constant_notes": {"P_TILE": "queries per tile, keys per transposed block (pmax)",
                           "KEY_TILE": "keys per score matmul: one PSUM bank"},
    })  # fmt: skip
    return p


def _coord(x: Expr) -> str | None:
    if x.kind != "coord" or len(x.index) != 1:
        return None
    return _unit_var(x.index[0])


def _operand(ld: Expr, row: str, kv: str, batch: list[str]) -> None:
    """_NoFit unless each axis of an operand is a batch coordinate, `row`, `kv` (the
    contraction: last) or a fixed index, every batch coordinate once."""
    idx: list[str] = []
    for ix in ld.index:
        u = _unit_var(ix)
        if u in batch or u in (row, kv):
            idx.append("row" if u == row else "k" if u == kv else u or "")
        elif not ix.terms and ix.gather is None:
            idx.append("")
        else:
            raise _NoFit(f"{ld.render()}: an index other than a coordinate or a constant")
    if sorted(x for x in idx if x in batch) != sorted(batch) or idx.count("row") != 1:
        raise _NoFit(f"{ld.render()} does not read one row per batch entry")
    if idx.count("k") != 1 or idx[-1] != "k":
        raise _NoFit(f"{ld.render()}: the contraction axis is not its innermost")


def _literal(v: Any) -> str:
    if v is None:
        return "0.0"
    f = float(v)
    if f != f:
        return 'float("nan")'
    if f in (float("inf"), float("-inf")):
        return 'float("-inf")' if f < 0 else 'float("inf")'
    return repr(f)
