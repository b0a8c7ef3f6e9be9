"""Small pieces of the lowering rules over lifted programs."""

from migrator.patterns.lifted import _bare, _hoisted, _masked_add


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
    lines, expr = _hoisted("nl.add(nl.exp(a), nl.multiply(nl.exp(a), b))", "v_")
    assert lines == [("v_0", "nl.exp(a)")] and expr == "nl.add(v_0, nl.multiply(v_0, b))"
