"""Small pieces of the lowering rules over lifted programs."""

from migrator.patterns.lifted import _bare


def test_a_size_loses_redundant_parentheses_but_an_expression_keeps_them() -> None:
    # templates write `rows // {run}`: `rows // C * T` would be `(rows // C) * T`
    assert _bare("(T)") == "T"
    assert _bare("(C * T)") == "(C * T)"
    assert _bare("256") == "256"
