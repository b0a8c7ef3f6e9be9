"""Ranges that follow the element: prefix sums lift as `sum_{k < j + 1}`, evaluate like numpy's
cumsum, and emit as one scan instruction per row in either NKI dialect."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.lift.lifter import reduce_cost
from migrator.lift.program import Assign, Expr, IndexMap, Program, Term, evaluate
from migrator.migration import migrate

ROW_CUMSUM = (
    """
    // running sums along each row, one thread per row walking its columns
    __global__ void row_cumsum(const float* x, float* y, int R, int C) {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r >= R) return;
        float acc = 0.0f;
        for (int c = 0; c < C; ++c) {
            acc += x[r * C + c];
            y[r * C + c] = acc;
        }
    }
    """,
    """
    [kernel]
    name = "row_cumsum"
    [sizes]
    R = 130
    C = 77
    [[size_sets]]
    R = 5
    C = 300
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["R", "C"]
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["R", "C"]
    [[scalars]]
    name = "R"
    size = "R"
    [[scalars]]
    name = "C"
    size = "C"
    [launch]
    grid = ["ceil_div(R, 64)"]
    block = [64]
    """,
)


def _write(tmp_path: Path) -> Path:
    (tmp_path / "row_cumsum.cu").write_text(textwrap.dedent(ROW_CUMSUM[0]))
    (tmp_path / "row_cumsum.toml").write_text(textwrap.dedent(ROW_CUMSUM[1]))
    return tmp_path / "row_cumsum.cu"


def test_a_running_sum_lifts_with_a_range_that_follows_the_element(tmp_path: Path) -> None:
    _write(tmp_path)
    result = lift_task(load_spec(tmp_path / "row_cumsum.toml"))
    assert result.ok, result.render()
    assert result.program is not None
    assert result.program.render() == "y[i, j] = sum_{k < j + 1} x[i, k]"


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_running_sum_emits_one_scan_per_row(api: str, tmp_path: Path) -> None:
    (k,) = migrate(_write(tmp_path), out_dir=tmp_path / "out", nki_api=api).kernels
    assert (k.family, k.status) == ("scan", "complete")
    assert k.check is not None and k.check.ok
    assert "tensor_tensor_scan" in (k.nki_source or "")


def _prefix_program(run: int) -> Program:
    """out[i] = sum_{k < (i % run) + 1} x[k + run*(i // run)]"""
    load = Expr(kind="load", tensor="x", index=[IndexMap(terms=[
        Term(coef=1, var="k"), Term(coef=run, var="i", div=run)])])  # fmt: skip
    red = Expr(kind="reduce", op="sum", var="k", args=[load],
               upto=IndexMap(terms=[Term(coef=1, var="i", mod=run)], const=1))  # fmt: skip
    return Program(assigns=[Assign(tensor="out", vars=["i"], expr=red)])


@pytest.mark.parametrize("n", [1, 7, 8, 9, 30])
def test_ragged_sums_evaluate_like_cumsum_per_run_dense_and_sampled(n: int) -> None:
    x = np.random.default_rng(n).normal(size=n)
    want = np.concatenate([np.cumsum(x[s : s + 8]) for s in range(0, n, 8)])
    prog = _prefix_program(8)
    dense = evaluate(prog, {"x": x}, {"out": (n,)}, {}, {})["out"]
    np.testing.assert_allclose(dense, want, rtol=1e-12)
    at = np.unique(np.array([0, n // 2, n - 1]))
    sampled = evaluate(prog, {"x": x}, {"out": (n,)}, {}, {}, points={"out": at})["out"]
    np.testing.assert_allclose(sampled, want[at], rtol=1e-12)


def test_the_cost_of_a_ragged_sum_is_its_longest_range() -> None:
    (a,) = _prefix_program(256).assigns
    assert reduce_cost(a.expr, {}, (100_000,), ["i"]) == 256
    assert reduce_cost(a.expr, {}, (10,), ["i"]) == 10


def test_a_ragged_range_s_largest_value_is_computed_once_per_sizes_and_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (the size choices ask it again and again: an attention's 315 times, 0.17 s)
    from migrator.lift import lifter

    calls: list[int] = []
    real = lifter._largest_at

    def once(*args: object) -> int:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(lifter, "_largest_at", once)
    monkeypatch.setattr(lifter, "_LARGEST", {})
    (a,) = _prefix_program(256).assigns
    for _ in range(3):
        assert reduce_cost(a.expr, {}, (100_000,), ["i"]) == 256
    assert reduce_cost(a.expr, {}, (10,), ["i"]) == 10
    assert len(calls) == 2  # one per output shape


def test_a_verification_set_is_bounded_by_the_programs_arithmetic(tmp_path: Path) -> None:
    """The grown verification set costs no more arithmetic (outputs times the elements each
    reduces) than the task's largest set, or LIFT_MIN_VOLUME: threads and tensor sizes alone
    let a row-per-thread kernel's grown set loop far longer than any set of the task."""
    from migrator.lift.lifter import LIFT_MIN_VOLUME, _volume, check_sizes

    (tmp_path / "row_cumsum.cu").write_text(textwrap.dedent(ROW_CUMSUM[0]))
    (tmp_path / "row_cumsum.toml").write_text(textwrap.dedent(ROW_CUMSUM[1]))
    spec = load_spec(tmp_path / "row_cumsum.toml")
    load = Expr(kind="load", tensor="x", index=[IndexMap(terms=[Term(coef=1, var="k")])])
    sums = Expr(kind="reduce", op="sum", var="k", args=[load], extent="C")
    prog = Program(assigns=[Assign(tensor="y", vars=["i", "j"], expr=sums)])
    fitted = [{"R": 20, "C": 1000}]  # (grown: R = 43, C = 2003, 172M additions)
    own = [_volume(spec, prog, dict(s)) for s in spec.all_size_sets()]
    assert all(v > 0 for v in own)
    cap = max([*own, 2 * _volume(spec, prog, fitted[0]), LIFT_MIN_VOLUME])
    sets = check_sizes(spec, fitted, prog)
    assert sets and all(_volume(spec, prog, s) <= cap for s in sets)
    # without the program the grown set is only bounded by threads and elements
    unbounded = check_sizes(spec, fitted)
    assert max(_volume(spec, prog, s) for s in unbounded) > cap
