"""Small pieces of the lowering rules over lifted programs."""

from migrator.patterns.lifted import _bare, _column_factors_out, _hoisted, _masked_add

from migrator.contract import TaskSpec
from migrator.lift.program import Assign, Expr, IndexMap, Program, Term
from migrator.lift.views import view_candidates


def _v(var: str, **kw: object) -> IndexMap:
    return IndexMap(terms=[Term(coef=1, var=var, **kw)])


def _load(t: str, *index: IndexMap) -> Expr:
    return Expr(kind="load", tensor=t, index=list(index))


def test_a_size_loses_redundant_parentheses_but_an_expression_keeps_them() -> None:
    # templates write `rows // {run}`: `rows // C * T` would be `(rows // C) * T`
    assert _bare("(T)") == "T"
    assert _bare("(C * T)") == "(C * T)"
    assert _bare("256") == "256"


def test_a_one_hot_term_fuses_but_a_max_num_select_keeps_its_nan_handling() -> None:
    wide = ["x_row", "col_ids"]
    hot = "nl.add(nl.multiply(x_row, g_col), nl.where(nl.equal(col_ids, t_col), neg_col, 0.0))"
    assert _masked_add(hot, wide) == (
        "nisa.scalar_tensor_tensor(data=nl.equal(col_ids, t_col), op0=nl.multiply, "
        "operand0=neg_col, op1=nl.add, operand1=nl.multiply(x_row, g_col), dtype=nl.float32)"
    )
    relu = "nl.add(x_row, nl.where(nl.greater(s_col, 0.0), s_col, 0.0))"
    assert _masked_add(relu, wide) == relu  # (NaN * 0 is NaN; the select gives 0)
    whole_row = "nl.add(g_col, nl.where(nl.equal(col_ids, t_col), x_row, 0.0))"
    assert _masked_add(whole_row, wide) == whole_row  # operand0 must be one value per row


def test_a_call_made_twice_is_bound_once() -> None:
    lines, (expr,) = _hoisted(["nl.add(nl.exp(a), nl.multiply(nl.exp(a), b))"], "v_")
    assert lines == [("v_0", "nl.exp(a)")] and expr == "nl.add(v_0, nl.multiply(v_0, b))"


def test_a_call_inside_a_bound_call_is_bound_too_and_computed_first() -> None:
    # `x - m` is inside the shared product and in a second text: bound once, before the product
    texts = [
        "nl.sum(nl.multiply(nl.multiply(d, nl.subtract(x, m)), w))",
        "nl.multiply(nl.multiply(d, nl.subtract(x, m)), g)",
        "nl.add(nl.subtract(x, m), c)",
    ]
    lines, out = _hoisted(texts, "rc")
    assert lines == [("rc0", "nl.subtract(x, m)"), ("rc1", "nl.multiply(d, rc0)")]
    assert out == ["nl.sum(nl.multiply(rc1, w))", "nl.multiply(rc1, g)", "nl.add(rc0, c)"]


def test_a_factor_at_the_output_column_comes_out_of_a_row_sum() -> None:
    # sum_k y[i, k] * y[i, j]: inside the sum the row tile runs over k, so y[i, j] is taken out
    body = Expr(
        kind="op", op="*", args=[_load("y", _v("i"), _v("k")), _load("y", _v("i"), _v("j"))]
    )
    red = Expr(kind="reduce", op="sum", var="k", extent="T", args=[body])
    out = _column_factors_out(red, "j")
    assert out.render() == "y[i, j] * (sum_{k < T} y[i, k])"
    # a max keeps its factors (max_k a * x_k is not a * max_k x_k for negative a)
    mx = red.model_copy(update={"op": "max"})
    assert _column_factors_out(mx, "j") == mx


def test_an_nd_output_is_seen_as_rows_of_its_last_axis() -> None:
    """`dx[i, j, l]` over `[B * NH, T, T]` as `dx[r, l]` over `[B * NH * T, T]`: a tensor laid
    out alike and a flat one read at the same offsets take the view; the range's end `j + 1`
    is the row modulo T."""
    spec = TaskSpec.model_validate({
        "kernel": {"name": "k"}, "sizes": {"BH": 3, "T": 5},
        "tensors": [{"name": "d", "role": "in", "shape": ["BH * T * T"]},
                    {"name": "a", "role": "in", "shape": ["BH", "T", "T"]},
                    {"name": "o", "role": "out", "shape": ["BH", "T", "T"]}],
        "launch": {"grid": [1], "block": [1]},
    })  # fmt: skip
    flat = IndexMap(terms=[Term(coef="T * T", var="i"), Term(coef="T", var="j"),
                           Term(coef=1, var="q")])  # fmt: skip
    body = Expr(kind="op", op="*", args=[_load("a", _v("i"), _v("j"), _v("q")), _load("d", flat)])
    upto = IndexMap(terms=[Term(coef=1, var="j")], const=1)
    red = Expr(kind="reduce", op="sum", var="q", upto=upto, args=[body])
    program = Program(assigns=[Assign(tensor="o", vars=["i", "j", "l"], expr=red)])
    (view, vspec), *_ = [v for v in view_candidates(program, spec)
                         if len(v[0].assigns[0].vars) == 2]  # fmt: skip
    assert view.render() == "o[i, j] = sum_{q < (i % T) + 1} (a[i, q] * d[i, q])"
    assert [t.shape for t in vspec.tensors] == [["BH * T", "T"]] * 3


def test_flat_tensors_take_the_views_of_an_nd_output_and_a_two_digit_one() -> None:
    """`o[i, j, l]` over `[BH, T, D]` already reads a flat `k` at `(T * D) * i + D * t + l`:
    k is seen as `[BH, T, D]`; a flat `s[n]` beside it, its n split once (`n // T`,
    `n % T`), is `[BH, T]` (two digits, where the program has a three-digit output)."""
    spec = TaskSpec.model_validate({
        "kernel": {"name": "k"}, "sizes": {"BH": 3, "T": 5, "D": 4},
        "tensors": [{"name": "k", "role": "in", "shape": ["BH * T * D"]},
                    {"name": "q", "role": "in", "shape": ["BH", "T", "D"]},
                    {"name": "o", "role": "out", "shape": ["BH", "T", "D"]},
                    {"name": "s", "role": "out", "shape": ["BH * T"]}],
        "launch": {"grid": [1], "block": [1]},
    })  # fmt: skip
    at = IndexMap(terms=[Term(coef="T * D", var="i"), Term(coef="D", var="t"),
                         Term(coef=1, var="l")])  # fmt: skip
    body = Expr(kind="op", op="*", args=[_load("k", at), _load("q", _v("i"), _v("j"), _v("l"))])
    o = Assign(tensor="o", vars=["i", "j", "l"],
               expr=Expr(kind="reduce", op="sum", var="t", extent="T", args=[body]))  # fmt: skip
    row = IndexMap(terms=[Term(coef="T * D", var="n", div="T"), Term(coef="D", var="n", mod="T")])
    s = Assign(tensor="s", vars=["n"], expr=_load("k", row))
    views = view_candidates(Program(assigns=[o, s]), spec)
    (view, vspec), *_ = [v for v in views if len(v[0].assigns[1].vars) == 2]
    assert view.render().splitlines() == [
        "o[i, j, l] = sum_{t < T} (k[i, t, l] * q[i, j, l])",
        "s[i0, i1] = k[i0, i1, 0]",
    ]
    assert {t.name: t.shape for t in vspec.tensors}["k"] == ["BH", "T", "D"]
