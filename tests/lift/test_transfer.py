"""A value computed as another was, over other elements, takes the other's canonical form with
its leaves renamed (`migrator.lift.transfer`); the result is always what canonicalising it
afresh gives, whether the renaming applies or is refused."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.cuda.interp.traced import Sym
from migrator.lift import transfer
from migrator.lift.fit import Canonicaliser


def _online_row(xs: list[Sym], scale: Sym | None = None) -> tuple[Sym, Sym]:
    """(max, sum) of a row by the branchy online recurrence (`if (x > m) s *= exp(m - x)`)."""
    m, s = xs[0], (xs[0] - xs[0]).exp()
    for x in xs[1:]:
        grown = s * (m - x).exp() + (x - x).exp()
        s = Sym(0.0, "select", (">", x, m, grown, s + (x - m).exp()))
        m = Sym(max(m.v, x.v), "select", (">", x, m, x, m))
    if scale is not None:
        s = s * scale
    return m, s


def _row(tensor: str, start: int, values: list[float], order: list[int] | None = None) -> list[Sym]:
    idx = order if order is not None else list(range(len(values)))
    return [Sym.leaf(tensor, start + i, v) for i, v in zip(idx, values, strict=True)]


def _softmax_element(xs: list[Sym], j: int, scale: Sym | None = None) -> Sym:
    m, s = _online_row(xs, scale)
    return (xs[j] - m).exp() / s


def _fresh(x: Sym) -> Any:
    c = Canonicaliser(rename=False)
    return c.key(c(x))


def _renamed_hits(c: Canonicaliser) -> int:
    """The canonicalisation effort renaming saved (more than 0: some value was renamed)."""
    return c.ledger.get(None, (0, 0))[1]


ROW = st.lists(st.floats(-4, 4, allow_nan=False), min_size=10, max_size=14)


@settings(max_examples=25, deadline=None)
@given(ROW, st.integers(1, 6))
def test_a_row_like_an_earlier_one_is_renamed_and_equals_its_fresh_form(
    values: list[float], shift: int
) -> None:
    n = len(values)
    c = Canonicaliser()
    first = _softmax_element(_row("x", 0, values), 3)
    second = _softmax_element(_row("x", shift * n, values[::-1]), 3)
    c(first)
    got = c(second)
    assert _renamed_hits(c) > 0
    assert c.key(got) == _fresh(second)


@settings(max_examples=25, deadline=None)
@given(ROW, st.integers(1, 6))
def test_rows_of_two_tensors_shifted_apart_are_sorted_again_where_needed(
    values: list[float], shift: int
) -> None:
    """x shifts by rows of n, the per-row scale w by one: elements of x and w may compare
    differently after the renaming (the sums are checked and sorted again)."""
    n = len(values)
    c = Canonicaliser()
    first = _softmax_element(_row("x", 0, values), 2, Sym.leaf("w", 0, 0.5))
    second = _softmax_element(_row("x", shift * n, values), 2, Sym.leaf("w", shift, 0.25))
    c(first)
    got = c(second)
    assert _renamed_hits(c) > 0
    assert c.key(got) == _fresh(second)


def test_elements_of_a_row_at_other_columns_are_not_renamed_into_each_other() -> None:
    """`y[r, j]` and `y[r', j']`: the element's own x is one of the row's leaves at another
    position, which no renaming of the leaves maps consistently; the row's max and sum
    below it still are renamed."""
    values = [0.3, -1.2, 2.5, 0.1, 0.7, -0.4, 1.9, -2.2, 0.0, 1.1, 0.6, -0.9]
    n = len(values)
    c = Canonicaliser()
    first = _softmax_element(_row("x", 0, values), 1)
    second = _softmax_element(_row("x", 5 * n, values), 7)
    c(first)
    got = c(second)
    assert c.key(got) == _fresh(second)
    assert _renamed_hits(c) > 0  # (the row's statistics)


def test_a_renaming_that_reorders_the_elements_is_refused() -> None:
    """The second row reads its elements in reverse: its terms sort otherwise, so it is
    canonicalised afresh, with the same result as without renaming."""
    values = [0.3, -1.2, 2.5, 0.1, 0.7, -0.4, 1.9, -2.2, 0.0, 1.1, 0.6, -0.9]
    n = len(values)
    c = Canonicaliser()
    first = _softmax_element(_row("x", 0, values), 0)
    rev = list(range(n))[::-1]
    second = _softmax_element(_row("x", 3 * n, values, order=rev), 0)
    c(first)
    got = c(second)
    assert c.key(got) == _fresh(second)


def test_a_reordering_renaming_is_refused_at_the_first_leaves_that_show_it() -> None:
    """Lanes of a butterfly reduce read one row in mirrored orders: the walk of the two DAGs
    stops at the first leaves whose order the renaming reverses (here the row's first and
    last elements, near the root), not after pairing every node of the DAG."""
    values = [0.3, -1.2, 2.5, 0.1, 0.7, -0.4, 1.9, -2.2, 0.0, 1.1, 0.6, -0.9]
    n = len(values)
    c = Canonicaliser()
    first = _softmax_element(_row("x", 0, values), 0)
    second = _softmax_element(_row("x", 3 * n, values, order=list(range(n))[::-1]), 0)
    c(first)
    nodes: dict[int, Sym] = {}
    todo = [second]
    while todo:
        v = todo.pop()
        if id(v) not in nodes:
            nodes[id(v)] = v
            todo.extend(a for a in v.args if isinstance(a, Sym))
    done, steps, _ = transfer._transfer(c, first, second)
    assert not done
    assert steps < len(nodes) // 4
    assert c.key(c(second)) == _fresh(second)


def test_a_constant_that_differs_stops_the_renaming() -> None:
    values = [0.3, -1.2, 2.5, 0.1, 0.7, -0.4, 1.9, -2.2, 0.0, 1.1, 0.6, -0.9]
    n = len(values)
    c = Canonicaliser()
    first = _softmax_element(_row("x", 0, values), 0) * 2.0
    second = _softmax_element(_row("x", n, values), 0) * 3.0
    c(first)
    got = c(second)
    assert c.key(got) == _fresh(second)
    assert 3.0 in c.key(got)[1] and 2.0 not in c.key(got)[1]


def test_operands_that_compare_otherwise_after_the_renaming_are_sorted_again() -> None:
    """max(a0 + a1 + z5, a0 + a1 + a2 + z5): both sums have the structure `sum(a*,z)`, and
    their keys compare z's 5 with a's 2 at one position; renamed with a shifted by 100 and z
    kept, that comparison turns (5 < 102), so the max's operands are sorted again."""

    def value(a0: int, z: int) -> Sym:
        a = [Sym.leaf("a", a0 + i, 0.1 * i) for i in range(3)]
        zz = Sym.leaf("z", z, 1.0)
        short, long = a[0] + a[1] + zz, a[0] + a[1] + a[2] + zz
        tail = Sym.leaf("a", a0 + 10, 0.0)
        for i in range(11, 70):  # (large enough to be renamed)
            tail = tail + Sym.leaf("a", a0 + i, 0.01 * i)
        return Sym(0.0, "max", (short, long)) + tail

    c = Canonicaliser()
    c(value(0, 5))
    got = c(value(100, 5))
    assert _renamed_hits(c) > 0
    assert c.key(got) == _fresh(value(100, 5))
