"""One-pass (online) softmax spellings lift to the two-pass program: a running sum rescaled by
exp(m_old - m_new) whenever the max grows is `sum_k exp(x_k - max)`, whether the rescale is
branch-free, only taken when a new max appears, or one branch of an if/else whose other branch
just adds (llm.c's spellings)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.contract import load_spec
from migrator.cuda.interp.traced import Sym
from migrator.lift import lift_task
from migrator.lift.fit import Canonicaliser
from migrator.migration import migrate

BRANCH_FREE = """
    // one thread per row; the running max and sum in one pass
    __global__ void softmax_online(const float* x, float* y, int N, int C) {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        if (row >= N) return;
        const float* xr = x + (size_t)row * C;
        float m = -INFINITY, s = 0.0f;
        for (int c = 0; c < C; ++c) {
            float m_new = fmaxf(m, xr[c]);
            s = s * expf(m - m_new) + expf(xr[c] - m_new);
            m = m_new;
        }
        for (int c = 0; c < C; ++c) y[(size_t)row * C + c] = expf(xr[c] - m) / s;
    }
"""
BRANCHY = """
    // the rescale only when a new max appears
    __global__ void softmax_online(const float* x, float* y, int N, int C) {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        if (row >= N) return;
        const float* xr = x + (size_t)row * C;
        float maxval = -INFINITY, sum = 0.0f;
        for (int c = 0; c < C; ++c) {
            if (xr[c] > maxval) {
                sum *= expf(maxval - xr[c]);
                maxval = xr[c];
            }
            sum += expf(xr[c] - maxval);
        }
        for (int c = 0; c < C; ++c) y[(size_t)row * C + c] = expf(xr[c] - maxval) / sum;
    }
"""
IF_ELSE = """
    // both branches spelled out: the new max rescales, an old one just adds
    __global__ void softmax_online(const float* x, float* y, int N, int C) {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        if (row >= N) return;
        const float* xr = x + (size_t)row * C;
        float hi = -INFINITY;
        double total = 0.0;
        for (int c = 0; c < C; ++c) {
            float prev = hi, v = xr[c];
            if (v > hi) {
                hi = v;
                total = total * expf(prev - hi) + expf(v - hi);
            } else {
                total += expf(v - hi);
            }
        }
        for (int c = 0; c < C; ++c) y[(size_t)row * C + c] = expf(xr[c] - hi) / total;
    }
"""
SPEC = """
    [kernel]
    name = "softmax_online"
    [sizes]
    N = 70
    C = 40
    [[size_sets]]
    N = 5
    C = 129
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["N", "C"]
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["N", "C"]
    [[scalars]]
    name = "N"
    size = "N"
    [[scalars]]
    name = "C"
    size = "C"
    [launch]
    grid = ["ceil_div(N, 32)"]
    block = [32]
"""
TWO_PASS = "y[i, j] = exp(x[i, j] - (max_{k < C} x[i, k])) / (sum_{q < C} exp(x[i, q] - (max_{r < C} x[i, r])))"  # noqa: E501


def _write(tmp_path: Path, src: str) -> Path:
    (tmp_path / "softmax_online.cu").write_text("#include <math.h>\n" + textwrap.dedent(src))
    (tmp_path / "softmax_online.toml").write_text(textwrap.dedent(SPEC))
    return tmp_path / "softmax_online.cu"


@pytest.mark.parametrize(
    "src", [BRANCH_FREE, BRANCHY, IF_ELSE], ids=["branch_free", "branchy", "if_else"]
)
def test_online_softmax_lifts_to_the_two_pass_program(src: str, tmp_path: Path) -> None:
    _write(tmp_path, src)
    result = lift_task(load_spec(tmp_path / "softmax_online.toml"))
    assert result.ok, result.render()
    assert result.program is not None and result.program.render() == TWO_PASS


def test_online_softmax_emits_as_a_row_program(tmp_path: Path) -> None:
    (k,) = migrate(_write(tmp_path, BRANCHY), out_dir=tmp_path / "out").kernels
    assert (k.family, k.status) == ("rows", "complete")
    assert k.check is not None and k.check.ok


def _leaf(n: int, v: float) -> Sym:
    return Sym.leaf("x", n, v)


def test_a_product_of_exponentials_adds_their_exponents_and_cancels_opposites() -> None:
    c = Canonicaliser()
    a, b, m = _leaf(0, 0.5), _leaf(1, -1.0), _leaf(2, 2.0)
    # exp(a - m) * exp(m - b) = exp(a - b): the m's cancel
    got = c((a - m).exp() * (m - b).exp())
    want = c((a - b).exp())
    assert got == want


def test_a_rescaled_running_sum_is_a_sum_of_terms_over_the_new_max() -> None:
    c = Canonicaliser()
    x0, x1, x2 = _leaf(0, 0.1), _leaf(1, 0.7), _leaf(2, -0.3)
    m1 = Sym(0.7, "max", (x0, x1))
    s1 = (x0 - m1).exp() + (x1 - m1).exp()
    m2 = Sym(0.7, "max", (m1, x2))
    s2 = s1 * (m1 - m2).exp() + (x2 - m2).exp()
    direct = (x0 - m2).exp() + (x1 - m2).exp() + (x2 - m2).exp()
    assert c(s2) == c(direct)


def test_a_rescale_taken_only_when_the_max_grows_is_the_unconditional_one() -> None:
    c = Canonicaliser()
    x0, x1 = _leaf(0, 0.1), _leaf(1, 0.7)
    s = (x0 - x0).exp()
    branchy = Sym(0.0, "select", (">", x1, x0, s * (x0 - x1).exp(), s))
    m = Sym(0.7, "max", (x1, x0))
    assert c(branchy) == c(s * (x0 - m).exp())


def test_other_products_and_selects_keep_their_form() -> None:
    c = Canonicaliser()
    x0, x1, x2 = _leaf(0, 0.1), _leaf(1, 0.7), _leaf(2, 0.2)
    # no exponential in the product: nothing spreads
    assert c((x0 + x1) * x2)[0] == "prod"
    # a select whose taken branch is not the rescale stays a select
    assert c(Sym(0.0, "select", (">", x1, x0, x2 * (x0 - x1).exp(), x0)))[0] == "sel"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=7))
def test_online_and_two_pass_forms_canonicalise_alike(xs: list[float]) -> None:
    """For any row, the online recurrence (branch-free) and the two-pass sum are one form."""
    c = Canonicaliser()
    leaves = [_leaf(n, v) for n, v in enumerate(xs)]
    m, s = leaves[0], (leaves[0] - leaves[0]).exp()
    for x in leaves[1:]:
        m_new = Sym(max(m.v, x.v), "max", (m, x))
        s = s * (m - m_new).exp() + (x - m_new).exp()
        m = m_new
    two_pass = leaves[0] - m
    direct = two_pass.exp()
    for x in leaves[1:]:
        direct = direct + (x - m).exp()
    assert c(s) == c(direct)


# A (max, sum) pair per lane, merged by comparing maxima (`big = a.m > b.m ? a : b`); one warp
# per row, lanes merged through shuffles of both fields; a lone element is `{x, 1.0f}`
PAIR_MERGE = """
    struct MaxSum { float m; float s; };

    __device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
        bool a_big = a.m > b.m;
        MaxSum big = a_big ? a : b;
        MaxSum small = a_big ? b : a;
        MaxSum r;
        r.m = big.m;
        r.s = big.s + small.s * __expf(small.m - big.m);
        return r;
    }

    __global__ void softmax_online(const float* x, float* y, int N, int C) {
        int row = blockIdx.x;
        int lane = threadIdx.x;
        const float* xr = x + (size_t)row * C;
        MaxSum acc = {-INFINITY, 0.0f};
        for (int c = lane; c < C; c += 32) {
            MaxSum one = {xr[c], 1.0f};
            acc = merge(acc, one);
        }
        for (int off = 16; off > 0; off >>= 1) {
            MaxSum other;
            other.m = __shfl_xor_sync(0xffffffff, acc.m, off);
            other.s = __shfl_xor_sync(0xffffffff, acc.s, off);
            acc = merge(acc, other);
        }
        for (int c = lane; c < C; c += 32) y[(size_t)row * C + c] = __expf(xr[c] - acc.m) / acc.s;
    }
"""


def test_pairs_merged_by_comparing_maxima_lift_to_the_two_pass_program(tmp_path: Path) -> None:
    _write(tmp_path, PAIR_MERGE)
    spec = (tmp_path / "softmax_online.toml").read_text()
    spec = spec.replace('grid = ["ceil_div(N, 32)"]', 'grid = ["N"]')
    (tmp_path / "softmax_online.toml").write_text(spec)
    result = lift_task(load_spec(tmp_path / "softmax_online.toml"))
    assert result.ok, result.render()
    assert result.program is not None and result.program.render() == TWO_PASS
    (k,) = migrate(tmp_path / "softmax_online.cu", out_dir=tmp_path / "out").kernels
    assert (k.family, k.status) == ("rows", "complete")
    assert k.check is not None and k.check.ok


def _merged(c: Canonicaliser, a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
    """`merge(a, b)` of PAIR_MERGE on traced values: every field selected by one comparison."""
    (am, as_), (bm, bs) = a, b
    big_m = Sym(max(_v(am), _v(bm)), "select", (">", am, bm, am, bm))
    small_m = Sym(min(_v(am), _v(bm)), "select", (">", am, bm, bm, am))
    take = _v(am) > _v(bm)
    big_s = Sym(_v(as_ if take else bs), "select", (">", am, bm, as_, bs))
    small_s = Sym(_v(bs if take else as_), "select", (">", am, bm, bs, as_))
    return big_m, big_s + small_s * (small_m - big_m).exp()


def _v(x: Any) -> float:
    return float(getattr(x, "v", x))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=8), st.randoms(use_true_random=False))
def test_pairs_merged_in_any_tree_canonicalise_as_the_two_pass_sum(xs: list[float],
                                                                   rnd: Any) -> None:  # fmt: skip
    """Whatever tree merges the (max, 1) pairs of a row, the sum is `sum_k exp(x_k - max)`."""
    c = Canonicaliser()
    leaves = [_leaf(n, v) for n, v in enumerate(xs)]
    parts: list[tuple[Any, Any]] = [(x, 1.0) for x in leaves]
    while len(parts) > 1:
        n = rnd.randrange(len(parts) - 1)
        parts[n : n + 2] = [_merged(c, parts[n], parts[n + 1])]
    m, s = parts[0]
    direct = (leaves[0] - m).exp()
    for x in leaves[1:]:
        direct = direct + (x - m).exp()
    assert c(s) == c(direct)


def test_the_lanes_copies_of_one_merge_tree_share_one_canonical_tree() -> None:
    """Each lane of a shuffle reduction merges its own copy of every partial result: distinct
    traced values over the same inputs. Their canonical trees are one object, so the rewrites
    a merge takes (the rescaled sums) run once, not once per lane."""
    c = Canonicaliser()

    def lane() -> Any:
        parts: list[tuple[Any, Any]] = [(_leaf(n, v), 1.0)
                                        for n, v in enumerate([0.5, -1.0, 2.0, 0.25])]  # fmt: skip
        while len(parts) > 1:
            parts = [_merged(c, parts[k], parts[k + 1]) for k in range(0, len(parts), 2)]
        return parts[0][1]

    first, second = lane(), lane()
    assert first is not second
    seen = c(first)
    built = len(c.shared)
    assert c(second) is seen
    assert len(c.shared) == built  # nothing new was built for the second lane


def test_a_canonicaliser_is_freed_without_the_cycle_collector() -> None:
    """The rescaling rewrites leave no reference cycle that holds the canonicaliser: its
    nodes (a million tuples for a real online softmax) go as soon as the fit is done, not at
    a collection that walks them all."""
    import gc
    import weakref

    was = gc.isenabled()
    gc.disable()
    try:
        c = Canonicaliser()
        leaves = [_leaf(n, v) for n, v in enumerate([0.3, -1.0, 2.0, 0.5])]
        m, s = leaves[0], (leaves[0] - leaves[0]).exp()
        for x in leaves[1:]:
            big = Sym(max(m.v, x.v), "max", (m, x))
            s = Sym(0.0, "select", (">", x, m, s * (m - x).exp() + (x - x).exp(),
                                    s + (x - m).exp()))  # fmt: skip
            m = big
        assert c(s)[0] == "sum"
        alive = weakref.ref(c)
        del c
        assert alive() is None
    finally:
        if was:
            gc.enable()
