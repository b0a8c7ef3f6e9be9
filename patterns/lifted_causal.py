"""Lowering rule for causal row programs over a lifted program:

    out[r, c] = c > b(r) ? K : f(row r, reductions over its columns k < b(r) + 1)

(a causal softmax storing 0 above the diagonal: llm.c's `attention_softmax_kernel1`). Such a
program equals the full-row program over the row with every column past b(r) set to -inf,
wherever the reductions ignore -inf (a max) or map it to nothing (`exp(-inf - m) = 0` in a
sum) and the element past the bound comes out as K: the rule builds that full-row program,
checks the equality numerically on random inputs with numpy, and emits it through the rows
template with one masking step (`where(column > bound, -inf, row)`) after each row load.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from migrator.patterns.lifted import _NoFit, _reduces, _rows, _the_output, note

from migrator.contract import TaskSpec, make_inputs
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.lift.program import (
    Expr,
    IndexMap,
    LiftError,
    Program,
    Term,
    _index,
    evaluate,
    value_of,
)
from migrator.plan import Plan

MAX_CHECK_ELEMENTS = 2_000_000  # output elements x row length of the equality check


def causal_rows(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program)
    e = _masked_past_the_range(a, spec) or a.expr
    compared = e.kind == "op" and e.op == "select" and e.name == ">"
    if not (compared and all(x.kind == "coord" for x in e.args[:2]) and e.args[2].kind == "const"):
        raise _NoFit("not a value chosen by a comparison of the coordinates")
    col, bound = e.args[0].index[0], e.args[1].index[0]
    rest = e.args[3]
    reds = _reduces(rest)
    if not reds or any(r.upto is None for r in reds):
        raise _NoFit("no reduction over a range that follows the row")
    upto = bound.model_copy(update={"const": _plus_one(bound.const)})
    if any(r.upto != upto for r in reds):
        raise _NoFit("reductions that do not end where the mask begins")
    out_t = spec.tensor_named(a.tensor)
    length, row_of = _row_length(a.vars, col, spec, out_t)
    full = rest.model_copy(deep=True)
    full = _full_rows(full, length)
    shape = {t.name: spec.shape_of(t, spec.sizes) for t in spec.tensors}
    masked = sorted({x.tensor or "" for x in full.walk()
                     if x.kind == "load" and shape[x.tensor or ""] == shape[a.tensor]})  # fmt: skip
    if not masked:
        raise _NoFit("no input laid out like the output to mask")
    whole = Program(assigns=[a.model_copy(update={"expr": full})])
    # (against the program as masked: where the kernel leaves elements unwritten, with 0 there)
    chosen = Program(assigns=[a.model_copy(update={"expr": e})])
    # -inf past the bound for a softmax (the max ignores it, its exp is 0); 0 for a sum of
    # products (a softmax's backward: the masked terms vanish)
    fill = None
    for value in (-np.inf, 0.0):
        try:
            _check_equal(chosen, whole, spec, masked, (col, bound), length, value)
        except _NoFit as err:
            failed = err
            continue
        fill = value
        break
    if fill is None:
        raise failed
    p = _rows(whole, tu, k, spec)
    mod, const = _bound_in_rows(bound, row_of, length)
    row_vars = {f"{n}_row" for n in masked} | {f"{n}_row" for n in (f"{m}_" for m in masked)}
    tiles = [ld["var"] for ld in p.fields["loads"]
             if ld["kind"] == "row" and ld["var"] in row_vars]  # fmt: skip
    if not tiles:
        raise _NoFit("the masked input is not loaded along rows")
    p.fields["row_mask"] = {"tiles": tiles, "mod": mod, "const": const,
                            "fill": 'float("-inf")' if fill < 0 else "0.0"}  # fmt: skip
    why = ("causal: the columns past the row's bound set to -inf on the row tile, so the max "
           "ignores them and their exp is 0 (checked equal to the lifted program's "
           f"`{e.args[2].value}` there)") if fill < 0 else (
           "causal: the columns past the row's bound set to 0 on the row tiles, so their "
           "terms vanish from the sums (checked equal to the lifted program's "
           f"`{e.args[2].value}` there)")  # fmt: skip
    if e is not a.expr:
        why += "; the CUDA original leaves those columns unwritten, the NKI kernel writes 0"
    p.notes["mask"] = note(k.span, why)
    p.fields["uses_isa"] = True
    return p


def _masked_past_the_range(a: Any, spec: TaskSpec) -> Expr | None:
    """A row program whose reductions all end at the element's own column bound
    (`sum_{k < i1 + 1}`) and that leaves the columns past it unwritten (llm.c's
    `softmax_forward_kernel5` computes only the lower triangle): `c > bound ? 0 : program`,
    the unwritten elements written 0 (an `out` tensor only: an in-place one keeps them)."""
    e = a.expr
    if e.kind == "op" and e.op == "select":
        return None
    if spec.tensor_named(a.tensor).role != "out":
        return None
    reds = _reduces(e)
    uptos = {r.upto.render() for r in reds if r.upto is not None}
    if not reds or len(uptos) != 1 or any(r.upto is None for r in reds):
        return None
    upto = reds[0].upto
    assert upto is not None
    if not isinstance(upto.const, int) or upto.const < 1:
        return None
    col = IndexMap(terms=[Term(coef=1, var=a.vars[-1])])
    bound = upto.model_copy(update={"const": upto.const - 1})
    return Expr(kind="op", op="select", name=">",
                args=[Expr(kind="coord", index=[col]), Expr(kind="coord", index=[bound]),
                      Expr(kind="const", value=0.0), e])  # fmt: skip


def _shrunk(
    spec: TaskSpec, sizes: dict[str, int], out_t: Any, length: int | str
) -> list[dict[str, int]]:
    """`sizes` with every size halved until the check's work fits, its relations kept (none
    if they cannot be)."""

    def work(s: dict[str, int]) -> int:
        return math.prod(spec.shape_of(out_t, s)) * int(value_of(length, s))

    cur = dict(sizes)
    while work(cur) > MAX_CHECK_ELEMENTS:
        smaller = {n: max(2, v // 2) for n, v in cur.items()}
        if smaller == cur:
            return []
        cur = smaller
    return [cur] if cur != sizes and not spec.broken_relations(cur) else []


def _plus_one(c: int | float | str) -> int | float | str:
    return c + 1 if isinstance(c, int) else f"{c} + 1"


def _row_length(
    vars_: list[str], col: IndexMap, spec: TaskSpec, out_t: object
) -> tuple[int | str, str]:
    """The row length and the map of the output coordinates to the row (the view the rows
    template uses): a flat output's column is `i % L` and its row `i // L`; a matrix's are j, i."""
    if len(col.terms) != 1 or col.const != 0 or col.gather is not None:
        raise _NoFit(f"{col.render()} is not the column")
    t = col.terms[0]
    if len(vars_) == 1 and t.var == vars_[0] and t.coef == 1 and t.div is None and t.mod:
        return t.mod, "flat"
    if len(vars_) == 2 and t.var == vars_[1] and t.coef == 1 and t.div is None and t.mod is None:
        return out_t.shape[1], "matrix"  # type: ignore[attr-defined]
    raise _NoFit(f"{col.render()} is not the column of the output's rows")


def _full_rows(e: Expr, length: int | str) -> Expr:
    """`e` with every ragged reduction over the whole row."""
    args = [_full_rows(x, length) for x in e.args]
    if e.kind == "reduce" and e.upto is not None:
        return e.model_copy(update={"upto": None, "extent": length, "args": args})
    return e.model_copy(update={"args": args}) if args else e


def _bound_in_rows(bound: IndexMap, row_of: str, length: int | str) -> tuple[int | str | None, int]:
    """The mask's bound as `(row % mod) + const` of the row index (mod None: the row itself)."""
    if len(bound.terms) != 1 or not isinstance(bound.const, int) or bound.gather is not None:
        raise _NoFit(f"the bound {bound.render()} is not a map of the row")
    t = bound.terms[0]
    if t.coef != 1:
        raise _NoFit(f"the bound {bound.render()} is not a map of the row")
    if row_of == "flat":
        # `(i // L) % m`: the row is i // L; the bound, the row % m
        if t.var != "i" or t.div != length:
            raise _NoFit(f"the bound {bound.render()} is not a map of the row")
        return t.mod, bound.const
    if t.var != "i" or t.div is not None:
        raise _NoFit(f"the bound {bound.render()} is not a map of the row")
    return t.mod, bound.const


def _check_equal(
    program: Program,
    whole: Program,
    spec: TaskSpec,
    masked: list[str],
    cmp: tuple[IndexMap, IndexMap],
    length: int | str,
    fill: float = -np.inf,
) -> None:
    """The lifted program on random inputs equals the full-row program on the same inputs with
    the masked positions at `fill`, at the smallest size sets of the task (two at most)."""
    a = program.assigns[0]
    out_t = spec.tensor_named(a.tensor)
    sets = sorted(spec.all_size_sets(), key=lambda s: math.prod(spec.shape_of(out_t, s)))[:2]
    # (an inferred [BH * T, T] task may have no set small enough: its smallest, shrunk)
    sets += _shrunk(spec, sets[0], out_t, length) if sets else []
    checked = 0
    for sizes in sets:
        shape = spec.shape_of(out_t, sizes)
        if math.prod(shape) * int(value_of(length, sizes)) > MAX_CHECK_ELEMENTS:
            continue
        shapes = {t.name: spec.shape_of(t, sizes) for t in spec.tensors}
        ins = {n: np.asarray(v, dtype=np.float64) for n, v in make_inputs(spec, sizes, 7).items()}
        params = {s.name: float(spec.scalar_value(s, sizes)) for s in spec.scalars
                  if s.value is not None}  # fmt: skip
        env = {v: np.arange(n).reshape([n if d == ax else 1 for d in range(len(shape))])
               for ax, (v, n) in enumerate(zip(a.vars, shape, strict=True))}  # fmt: skip
        past = np.broadcast_to(_index(cmp[0], env, sizes) > _index(cmp[1], env, sizes), shape)
        minus = {n: np.where(past, fill, v) if n in masked else v for n, v in ins.items()}
        try:
            want = evaluate(program, ins, shapes, sizes, params)[a.tensor]
            with np.errstate(all="ignore"):
                got = evaluate(whole, minus, shapes, sizes, params)[a.tensor]
        except (LiftError, ValueError, ArithmeticError) as e:
            raise _NoFit(f"the full-row form could not be evaluated: {e}") from e
        same = (got == want) | np.isclose(got, want, rtol=1e-9, atol=1e-12)
        if not bool(np.all(same)):
            raise _NoFit(f"the full row with {fill} past the mask does not give the masked values")
        checked += 1
    if not checked:
        raise _NoFit("no size set small enough to check the full-row form")
