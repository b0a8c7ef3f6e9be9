"""Lowering rule for attention over a lifted program, whatever its CUDA spelling:

    O[i, j] = sum_t p(i, t) * V[t, j] / sum_t p(i, t),   p(i, t) = exp(s(i, t) - max_u s(i, u)),
    s(i, t) = c * sum_d Q[i, d] * K[t, d]

(c a product of scalar parameters and constants; Q and K stored [rows, D] or transposed
[D, rows]; the normaliser outside the key sum or inside it; the key reductions over every key,
or causal: `t < i + 1`). It becomes the fused NKI form of the attention tutorial: K^T and V
resident in SBUF, per tile of 128 queries Q^T stationary and scores for 512 keys per matmul in
one PSUM bank, scale and row max on the way out of PSUM, exp and row sum in one ScalarE
instruction, the probabilities turned block by block and multiplied with V into PSUM, 1 / sum
on the way out. Causal programs skip the key tiles above the diagonal and mask the diagonal
tiles' scores with an affine select. Outputs beside O that hold each query row's max score or
its sum of exp(s - max) (a flash kernel's running m and l, stored at its end) are stored from
the same tiles.
"""

from __future__ import annotations

from typing import Any

from migrator.patterns.lifted import (
    _bind,
    _clip,
    _float32_only,
    _is_var,
    _lift_note,
    _NoFit,
    _Renderer,
    _tensor,
    _unit_var,
)

from migrator.contract import TaskSpec
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.lift.program import Expr, IndexMap, Program, negated, value_of
from migrator.plan import PMAX, Plan, note

KEY_TILE = 512  # keys per score matmul: one 2 KiB PSUM bank of fp32 per partition
MAX_KEYS = 8192  # K^T, V and one query tile's scores resident: 3 * 32 KiB per partition (fp32)
MAX_VALUE_DIM = 512  # one PSUM bank holds a query tile's [128, Dv] fp32 output


def attention(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    most = max(len(a.vars) for a in program.assigns)
    mains = [a for a in program.assigns if len(a.vars) == most]
    if most < 2:
        raise _NoFit("the output is not a matrix (or a batch of them)")
    if len(mains) != 1:
        raise _NoFit("more than one output")
    a = mains[0]
    *batch, i, j = a.vars
    m = _match(_per_matrix(a.expr, batch), i, j)
    # outputs beside O: the row max and the softmax's row sum (a flash kernel's m and l)
    stats = {x.tensor: _row_stat(x, batch, i, m) for x in program.assigns if x is not a}
    p = _bind(tu, k, spec, "attention", "lifted")
    q_t, k_t, v_t = (_tensor(p, m[n]) for n in ("q", "k", "v"))
    out = _tensor(p, a.tensor)
    _float32_only((q_t, k_t, v_t, out), "attention is")
    r = _Renderer(p, spec, lambda ld: "")
    scale = " * ".join(r.convert(f).text for f in m["scale"]) or "1.0"
    nb = len(batch)
    queries = out.shape[nb]
    keys = k_t.shape[nb + 1] if m["k_transposed"] else k_t.shape[nb]
    head = q_t.shape[nb] if m["q_transposed"] else q_t.shape[nb + 1]
    if any(len(t.shape) != nb + 2 for t in (q_t, k_t, v_t, out)) or any(
        t.shape[:nb] != out.shape[:nb] for t in (q_t, k_t, v_t)
    ):
        raise _NoFit("the tensors' batch axes differ")
    for sset in spec.all_size_sets():
        d, dv = int(value_of(m["d_extent"], sset)), int(value_of(v_t.shape[nb + 1], sset))
        n_keys = int(value_of(m["t_extent"], sset)) if m["t_extent"] is not None else 0
        if d > PMAX:
            raise _NoFit(f"a head dim of {d} (at {sset}): above {PMAX} the contraction needs "
                         "several partition tiles, not emitted yet")  # fmt: skip
        if dv > MAX_VALUE_DIM:
            raise _NoFit(f"value rows of {dv} (at {sset}) exceed one PSUM bank")
        if n_keys > MAX_KEYS:
            raise _NoFit(f"{n_keys} keys (at {sset}): above {MAX_KEYS} K and V do not stay "
                         "in SBUF; the streamed (flash) form is not emitted yet")  # fmt: skip
    p.constants = {"P_TILE": PMAX, "KEY_TILE": KEY_TILE, "MAX_KEYS": MAX_KEYS}
    p.notes = {
        "resident": note(k.span, "K^T (turned on the Tensor engine) and V stay in SBUF for "
                         "every query tile"),
        "scores": note(k.span, "scores for KEY_TILE keys per matmul (Q^T stationary, "
                       "contraction over the head dim), scaled with their row max on the way "
                       "out of PSUM"),
        "softmax": note(k.span, "exp(s - max) and its row sum in one ScalarE instruction per "
                        "score tile"),
        "pv": note(k.span, "each 128-key block of probabilities turned (keys on the "
                   "partitions) and multiplied with V, accumulating in PSUM; 1 / sum on the way "
                   "out"),
        "store": _lift_note(k, program),
    }  # fmt: skip
    if m["causal"]:
        p.notes["causal"] = note(k.span, "causal: key tiles past the query tile's last row "
                                 "are skipped; on the diagonal, keys after the query are "
                                 "set to -3e38 before the max (exp gives 0)")  # fmt: skip
    batched = " * ".join(str(d) if str(d).isidentifier() else f"({d})" for d in out.shape[:nb])
    views = []  # each tensor as [batch entries, rows, cols], one (batch, head) pair per entry

    def at(t: Any, var: str) -> str:
        if not nb and len(t.shape) == 2:
            return var
        cols = t.shape[nb + 1] if len(t.shape) == nb + 2 else 1  # (a row statistic: one)
        lead = f"{batched}, " if nb else ""
        views.append({"var": f"{var}_h", "expr": f"{var}.reshape(({lead}"
                      f"{t.shape[nb]}, {cols}))"})  # fmt: skip
        return f"{var}_h"

    stat_out = {}
    for name, what in stats.items():
        t = _tensor(p, name)
        _float32_only((t,), "attention is")
        if len(t.shape) != nb + 1 or t.shape[:nb] != out.shape[:nb] or \
                str(t.shape[nb]) != str(queries):  # fmt: skip
            raise _NoFit(f"{name} is not one value per query row")
        if what in stat_out:  # (one store each: a second output of it would stay unwritten)
            raise _NoFit(f"two outputs hold the {what}")
        stat_out[what] = at(t, t.var)
    if stat_out:
        p.notes["stats"] = note(k.span, "the row max and the row sum of exp(s - max) stored "
                                "beside the output (" + ", ".join(
                                    f"{n}: {w}" for n, w in stats.items()) + ")")  # fmt: skip

    p.fields.update({
        "q": at(q_t, q_t.name), "k": at(k_t, k_t.name), "v": at(v_t, v_t.name),
        "out": at(out, out.var), "views": views, "batch": batched or None,
        "bi": "bh, " if nb else "",
        "q_transposed": m["q_transposed"], "k_transposed": m["k_transposed"],
        "query_len": queries, "key_len": keys, "head": head, "value_dim": v_t.shape[nb + 1],
        "scale": scale, "causal": m["causal"], "uses_isa": True,
        "row_max": stat_out.get("row max"), "row_sum": stat_out.get("row sum"),
        "summary": _clip(a.render(), 200),
        "constant_notes": {"P_TILE": "queries per tile; keys per transposed block",
                           "KEY_TILE": "keys per score matmul (one PSUM bank of fp32)",
                           "MAX_KEYS": "longest key sequence kept resident in SBUF"},
    })  # fmt: skip
    return p


# --- recognising the program -----------------------------------------------------------------
def _per_matrix(e: Expr, batch: list[str]) -> Expr:
    """`e` with the batch coordinates dropped from every load (each must lead with them, in
    order: `Q[b, h, i, d]` -> `Q[i, d]`), so one (batch, head) pair reads as one attention."""
    if not batch:
        return e
    if e.kind == "load":
        lead = e.index[: len(batch)]
        if len(e.index) < len(batch) + 2 or [_unit_var(m) for m in lead] != batch:
            raise _NoFit(f"{e.render()} is not read per batch entry ({', '.join(batch)} first)")
        return e.model_copy(update={"index": e.index[len(batch) :]})
    if e.upto is not None and any(t.var in batch for t in e.upto.terms):
        raise _NoFit("a key range that follows the batch")
    return e.model_copy(update={"args": [_per_matrix(x, batch) for x in e.args]})


def _factors(e: Expr) -> list[tuple[bool, Expr]]:
    """`e` as a product: (is a divisor, factor) pairs; `1` factors dropped."""
    if e.kind == "op" and e.op == "*":
        return [f for a in e.args for f in _factors(a)]
    if e.kind == "op" and e.op == "/" and len(e.args) == 2:
        return _factors(e.args[0]) + [(not inv, x) for inv, x in _factors(e.args[1])]
    if e.kind == "const" and e.value == 1:
        return []
    return [(False, e)]


def _scalar(e: Expr) -> bool:
    return e.kind in ("param", "const")


def _rename(e: Expr, names: dict[str, str], fresh: list[int]) -> Expr:
    """`e` with its bound variables renamed in order of appearance and the free ones through
    `names`: two spellings of one expression render the same."""

    def im(m: IndexMap) -> IndexMap:
        terms = [t.model_copy(update={"var": names.get(t.var, t.var)}) for t in m.terms]
        g = m.gather
        if g is not None:
            g = g.model_copy(update={"index": [im(x) for x in g.index]})
        return m.model_copy(update={"terms": terms, "gather": g})

    if e.kind == "load":
        return e.model_copy(update={"index": [im(x) for x in e.index]})
    if e.kind == "reduce":
        fresh[0] += 1
        inner = {**names, e.var or "": f"_{fresh[0]}"}
        upto = im(e.upto) if e.upto is not None else None
        args = [_rename(x, inner, fresh) for x in e.args]
        return e.model_copy(update={"var": inner[e.var or ""], "upto": upto, "args": args})
    return e.model_copy(update={"args": [_rename(x, names, fresh) for x in e.args]})


def _same(a: Expr, va: str, b: Expr, vb: str) -> bool:
    """Whether `a` over `va` and `b` over `vb` are one function (bound names aside)."""
    ra = _rename(a, {va: "_t"}, [0]).render()
    rb = _rename(b, {vb: "_t"}, [0]).render()
    return ra == rb


def _key_range(red: Expr, i: str) -> tuple[bool, Any]:
    """(causal, extent) of a reduction over the keys: every key (extent), or `t < i + 1`."""
    if red.upto is None:
        return False, red.extent
    u = red.upto
    if u.gather is None and u.const == 1 and _is_var(IndexMap(terms=u.terms), i):
        return True, None
    raise _NoFit(f"keys up to {u.render()}: neither every key nor causal (`< {i} + 1`)")


def _match(e: Expr, i: str, j: str) -> dict[str, Any]:
    outer = _factors(e)
    nums = [x for inv, x in outer if not inv and x.kind == "reduce"]
    if len(nums) != 1 or nums[0].op != "sum":
        raise _NoFit("not a sum over keys of probabilities times values")
    num = nums[0]
    t = num.var or ""
    inner = _factors(num.args[0])
    divisors = [x for inv, x in outer + inner if inv]
    rest = [x for inv, x in outer if not inv and x is not num]
    if rest:
        raise _NoFit(f"a factor {_clip(rest[0].render(), 60)} outside the key sum")
    loads = [x for inv, x in inner if not inv and x.kind == "load"]
    vs = [x for x in loads if len(x.index) == 2 and _is_var(x.index[0], t)
          and _is_var(x.index[1], j)]  # fmt: skip
    if len(vs) != 1:
        raise _NoFit(f"no value row V[{t}, {j}] in the key sum")
    probs = [x for inv, x in inner if not inv and x is not vs[0]]
    if len(probs) != 1 or len(divisors) != 1:
        raise _NoFit("not one probability over one normaliser")
    prob, den = probs[0], divisors[0]
    if den.kind != "reduce" or den.op != "sum" or not _same(prob, t, den.args[0], den.var or ""):
        raise _NoFit("the normaliser is not the sum of the probabilities")
    if prob.kind != "op" or prob.op != "exp" or len(prob.args) != 1:
        raise _NoFit(f"the probability {_clip(prob.render(), 60)} is not an exponential")
    x = prob.args[0]
    parts = x.args if x.kind == "op" and x.op == "+" and len(x.args) == 2 else []
    found = None
    for score, other in (parts, parts[::-1]) if parts else ():
        mx = negated(other)
        if mx is not None and mx.kind == "reduce" and mx.op == "max" \
                and _same(score, t, mx.args[0], mx.var or ""):  # fmt: skip
            found = score, mx
    if found is None:
        raise _NoFit("the exponent is not a score minus its row max")
    score, mx = found
    ranges = {_key_range(red, i) for red in (num, den, mx)}
    if len(ranges) != 1:
        raise _NoFit("the key reductions run over different ranges")
    causal, extent = ranges.pop()
    out = _score(score, i, t)
    out.update(causal=causal, t_extent=extent, v=vs[0].tensor, row_max=mx, row_sum=den)
    return out


def _row_stat(x: Any, batch: list[str], i: str, m: dict[str, Any]) -> str:
    """What an output beside the attention's stores per query row: "row max" (the scores'
    max over the keys) or "row sum" (the sum of exp(score - max)), as the attention's own
    reductions are; _NoFit for anything else."""
    if len(x.vars) != len(batch) + 1:
        raise _NoFit(f"{x.tensor} is neither the output nor one value per query row")
    body = _per_matrix(_rename(x.expr, dict(zip(x.vars, [*batch, i], strict=True)), [0]), batch)
    for what in ("row max", "row sum"):
        if _same(body, i, m[what.replace(" ", "_")], i):
            return what
    raise _NoFit(f"{x.tensor} = {_clip(x.expr.render(), 60)} is neither the row max nor the "
                 "row sum of the attention's probabilities")  # fmt: skip


def _score(score: Expr, i: str, t: str) -> dict[str, Any]:
    """`c * sum_d Q[i, d] * K[t, d]` (either operand transposed): its parts."""
    fs = _factors(score)
    dots = [x for inv, x in fs if x.kind == "reduce"]
    scale = [x for inv, x in fs if x.kind != "reduce"]
    if len(dots) != 1 or any(inv for inv, _ in fs) or not all(_scalar(x) for x in scale):
        raise _NoFit(f"the score {_clip(score.render(), 80)} is not a scaled dot product")
    dot = dots[0]
    d = dot.var or ""
    if dot.op != "sum" or dot.upto is not None:
        raise _NoFit("the score's inner reduction is not a sum over the head dim")
    body = _factors(dot.args[0])
    loads = [x for inv, x in body if x.kind == "load"]
    scale += [x for inv, x in body if x.kind != "load"]
    if len(loads) != 2 or any(inv for inv, _ in body) or not all(_scalar(x) for x in scale):
        raise _NoFit("the score's sum is not a product of two loads")

    def layout(ld: Expr, row: str) -> bool | None:  # False: [row, d]; True: [d, row]
        if len(ld.index) != 2:
            return None
        if _is_var(ld.index[0], row) and _is_var(ld.index[1], d):
            return False
        if _is_var(ld.index[0], d) and _is_var(ld.index[1], row):
            return True
        return None

    for q, kk in (loads, loads[::-1]):
        qt, kt = layout(q, i), layout(kk, t)
        if qt is not None and kt is not None:
            return {"q": q.tensor, "k": kk.tensor, "q_transposed": qt, "k_transposed": kt,
                    "scale": scale, "d_extent": dot.extent}  # fmt: skip
    raise _NoFit("the score's sum does not read a query row and a key row along the head dim")
