"""Property tests for the index polynomial algebra."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from migrator.cuda import poly

SYMS = ["threadIdx.x", "blockIdx.x", "blockDim.x", "K", "i"]
monomials = st.lists(st.sampled_from(SYMS), max_size=2).map(lambda s: tuple(sorted(s)))
polys = st.dictionaries(monomials, st.integers(-50, 50).filter(bool), max_size=4)
envs = st.fixed_dictionaries({s: st.integers(-20, 20) for s in SYMS})


@given(polys, polys, envs)
def test_add_mul_agree_with_evaluation(a: poly.Poly, b: poly.Poly, env: dict[str, int]) -> None:
    assert poly.evaluate(poly.add(a, b), env) == poly.evaluate(a, env) + poly.evaluate(b, env)
    assert poly.evaluate(poly.mul(a, b), env) == poly.evaluate(a, env) * poly.evaluate(b, env)
    assert poly.evaluate(poly.sub(a, a), env) == 0


@given(polys, st.integers(1, 9), envs)
def test_exact_div_only_when_exact(a: poly.Poly, k: int, env: dict[str, int]) -> None:
    q = poly.exact_div(poly.scale(a, k), k)
    assert q == a
    r = poly.exact_div(a, k)
    if r is not None:
        assert poly.evaluate(r, env) * k == poly.evaluate(a, env)


@given(polys)
def test_no_zero_coefficients_are_kept(a: poly.Poly) -> None:
    for p in (poly.add(a, poly.neg(a)), poly.mul(a, {}), poly.add(a, a)):
        assert all(c != 0 for c in p.values())


@given(polys, envs)
def test_substitute_then_evaluate(a: poly.Poly, env: dict[str, int]) -> None:
    # substituting i := 2*K + 1 equals evaluating with i at that value
    sub = poly.substitute(a, {"i": poly.add(poly.scale(poly.sym("K"), 2), poly.const(1))})
    env2 = {**env, "i": 2 * env["K"] + 1}
    assert poly.evaluate(sub, env) == poly.evaluate(a, env2)


def test_affinity_counts_variant_factors() -> None:
    gx = poly.add(poly.mul(poly.sym("blockIdx.x"), poly.sym("blockDim.x")), poly.sym("threadIdx.x"))
    variant = {"threadIdx.x", "blockIdx.x", "i"}
    assert poly.is_affine_in(gx, variant)
    assert poly.is_affine_in(poly.mul(gx, poly.sym("K")), variant)
    assert not poly.is_affine_in(poly.mul(poly.sym("threadIdx.x"), poly.sym("i")), variant)
    assert poly.render(gx) == "blockIdx.x*blockDim.x + threadIdx.x"
    assert poly.coefficient_of(gx, "blockIdx.x") == poly.sym("blockDim.x")
