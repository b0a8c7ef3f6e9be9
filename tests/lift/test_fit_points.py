"""A form is fitted to a spread of the sampled elements, then computed at the others."""

from __future__ import annotations

import numpy as np
import pytest

from migrator.cuda.interp.traced import Sym
from migrator.lift.fit import (
    FIRST_POINTS,
    Canonicaliser,
    _first_points,
    fit_elements,
    fit_points,
)
from migrator.lift.program import Assign, LiftError, Program, evaluate

N = 96
SHAPES = {"x": (N,), "w": (4,), "y": (N,)}
SIZES = {"N": N}


def _traced(odd: int | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """`y[i] = 2 * x[i] + w[i % 4]` traced (at `odd`, `3 * x[i]` instead)."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(N), rng.standard_normal(4)
    out = np.empty(N, dtype=object)
    for i in range(N):
        xi, wi = Sym.leaf("x", i, float(x[i])), Sym.leaf("w", i % 4, float(w[i % 4]))
        out[i] = xi * 3.0 if i == odd else xi * 2.0 + wi
    return out, {"x": x, "w": w}


def _agrees(values: np.ndarray, inputs: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    def agrees(a: Assign, flat: list[int]) -> bool:
        want = np.array([float(values[i].v) for i in flat])
        got = evaluate(Program(assigns=[a]), inputs, SHAPES, SIZES, {},
                       {a.tensor: np.asarray(flat, dtype=np.int64)})[a.tensor]  # fmt: skip
        return bool(np.allclose(got, want))

    return agrees


def test_a_form_that_holds_at_the_other_elements_is_fitted_to_the_spread_only() -> None:
    values, inputs = _traced()
    picked = fit_points((N,), np.array([], dtype=np.int64))
    first = _first_points(picked, FIRST_POINTS[0])
    assert len(picked) >= 2 * FIRST_POINTS[-1] and len(first) == FIRST_POINTS[0]
    assert first[0] == picked[0] and first[-1] == picked[-1]
    c = Canonicaliser()
    a = fit_elements(c, "y", values, SHAPES, SIZES, agrees=_agrees(values, inputs))
    canonical = [i for i in range(N) if id(values[i]) in c.memo]
    assert canonical == first  # (the others were computed, not put in canonical form)
    assert _agrees(values, inputs)(a, list(range(N)))


def test_an_element_the_spread_missed_is_fitted_with_all_the_others() -> None:
    """One element of the rest computed otherwise: the spread's form fails there, every
    sampled element is fitted, and the fit says what the full fit says."""
    picked = fit_points((N,), np.array([], dtype=np.int64))
    odd = next(i for i in picked if i not in set(_first_points(picked)))
    values, inputs = _traced(odd)
    c = Canonicaliser()
    with pytest.raises(LiftError):
        fit_elements(c, "y", values, SHAPES, SIZES, agrees=_agrees(values, inputs))
    assert all(id(values[i]) in c.memo for i in picked)


def test_a_form_refused_at_the_others_is_fitted_again_to_a_denser_spread() -> None:
    """The narrow spread's form refused at the other elements (here by the check itself, as
    an index map that six elements leave ambiguous would be): the form is fitted to the
    denser spread, which holds the narrow one's elements, before every element is fitted."""
    values, inputs = _traced()
    picked = fit_points((N,), np.array([], dtype=np.int64))
    narrow, dense = (_first_points(picked, n) for n in FIRST_POINTS)
    assert set(narrow) < set(dense) < set(picked)
    check = _agrees(values, inputs)
    asked: list[int] = []

    def refuse_first(a: Assign, flat: list[int]) -> bool:
        asked.append(len(flat))
        return len(asked) > 1 and check(a, flat)

    c = Canonicaliser()
    a = fit_elements(c, "y", values, SHAPES, SIZES, agrees=refuse_first)
    assert asked == [len(picked) - len(narrow), len(picked) - len(dense)]
    assert [i for i in range(N) if id(values[i]) in c.memo] == dense
    assert check(a, list(range(N)))
