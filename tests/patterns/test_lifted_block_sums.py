"""Per-block partial sums (each block adds its run of consecutive inputs, the first pass of a
tree reduction): lifted as `partial[i] = sum_{k < 128} in[128*i + k]` over a flat input, seen
as rows of the run's length and emitted as a row reduction. `tests/data/block_sums.cu` reads
its size from the command line, so the task is inferred with that size free."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from migrator.contract import TaskSpec
from migrator.lift.program import Assign, Expr, IndexMap, Program, Term
from migrator.lift.views import view_candidates
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "block_sums.cu"


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_block_partial_sums_migrate_as_row_sums(tmp_path: Path, api: str) -> None:
    cu = tmp_path / "block_sums.cu"
    shutil.copy(KERNEL, cu)
    (k,) = migrate(cu, out_dir=tmp_path / api, nki_api=api).kernels
    assert k.status == "complete" and k.family == "rows", k.diagnostics
    assert k.check is not None and k.check.ok
    assert k.lifted is not None and k.lifted.program is not None
    assert k.lifted.program.render() == "partial[i] = sum_{k < 128} in_[i, k]"
    toml = (tmp_path / api / "block_sums.inferred.toml").read_text()
    assert 'shape = ["n / 128", "128"]' in toml  # the input seen as its runs
    assert 'relations = ["n % 128 == 0"]' in toml


def test_a_block_that_takes_two_inputs_a_thread(tmp_path: Path) -> None:
    """`grid(N / per_block)` with `per_block = 2 * 256` a host constant: the work of one
    block, which the kernel's code fixes, stays its value (as a size of its own it was varied
    from set to set and the input's extent fitted no product); traced over several blocks (a
    launch of one block hides the output's index: `sum_k in[k]`)."""
    cu = tmp_path / "block_sums_x2.cu"
    shutil.copy(KERNEL.with_name("block_sums_x2.cu"), cu)
    (k,) = migrate(cu, out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.family == "rows", k.diagnostics
    assert k.lifted is not None and k.lifted.program is not None
    assert k.lifted.program.render() == "partial[i] = sum_{k < 512} in_[i, k]"
    toml = (tmp_path / "out" / "block_sums_x2.inferred.toml").read_text()
    assert "per_block" not in toml and 'grid = ["N / (2 * 256)"' in toml


def test_a_block_that_is_a_host_constant_stays_its_value(tmp_path: Path) -> None:
    """`const int BLOCK = 128;` as the launch's block and in the output's length `(N + BLOCK -
    1) / BLOCK`, in no input and no argument: the block the launch is written for, its value
    in every size set and in the shapes (a size of its own, varied from set to set, was one
    the NKI kernel could read from no shape: a skeleton)."""
    cu = tmp_path / "block_sums_const.cu"
    shutil.copy(KERNEL.with_name("block_sums_const.cu"), cu)
    (k,) = migrate(cu, out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.family == "rows", k.diagnostics
    assert k.check is not None and k.check.ok
    assert k.lifted is not None and k.lifted.program is not None
    assert k.lifted.program.render() == "partial[i] = sum_{k < 128} x[i, k]"
    toml = (tmp_path / "out" / "block_sums_const.inferred.toml").read_text()
    assert "BLOCK" not in toml and 'grid = ["(N + 128 - 1) / 128"]' in toml


def _spec(shapes: dict[str, str]) -> TaskSpec:
    return TaskSpec.model_validate({
        "kernel": {"name": "k"}, "sizes": {"N": 1024}, "size_sets": [{"N": 256}],
        "tensors": [{"name": n, "role": "out" if n == "o" else "in", "shape": [s]}
                    for n, s in shapes.items()],
        "launch": {"grid": [1], "block": [1]},
    })  # fmt: skip


def _run(coef: object, extent: object, tensor: str = "x") -> Expr:
    at = IndexMap(terms=[Term(coef=coef, var="i"), Term(coef=1, var="k")])
    return Expr(kind="reduce", op="sum", var="k", extent=extent,
                args=[Expr(kind="load", tensor=tensor, index=[at])])  # fmt: skip


def _views(expr: Expr, shapes: dict[str, str]) -> list[str]:
    program = Program(assigns=[Assign(tensor="o", vars=["i"], expr=expr)])
    return [p.render() for p, _ in view_candidates(program, _spec(shapes))]


def test_runs_of_the_reductions_length_are_rows() -> None:
    got = _views(_run(256, 256), {"x": "N", "o": "N / 256"})
    assert got == ["o[i] = sum_{k < 256} x[i, k]"]
    # with the output's old value added (`partial[i] += ...`): it stays a read at the element
    plus = Expr(kind="op", op="+", args=[
        Expr(kind="load", tensor="o", index=[IndexMap(terms=[Term(coef=1, var="i")])]),
        _run(256, 256)])  # fmt: skip
    assert _views(plus, {"x": "N", "o": "N / 256"}) == ["o[i] = o[i] + (sum_{k < 256} x[i, k])"]


def test_reads_that_are_not_whole_runs_laid_end_to_end_take_no_view() -> None:
    assert _views(_run(256, 128), {"x": "N", "o": "N / 256"}) == []  # runs with gaps
    assert _views(_run(128, 256), {"x": "N", "o": "N / 256"}) == []  # runs that overlap
    assert _views(_run(256, 256), {"x": "2 * N", "o": "N / 256"}) == []  # not `rows` runs
    # the same tensor also read flat at the element: no one view serves both reads
    both = Expr(kind="op", op="+", args=[
        Expr(kind="load", tensor="x", index=[IndexMap(terms=[Term(coef=1, var="i")])]),
        _run(256, 256)])  # fmt: skip
    assert _views(both, {"x": "N", "o": "N / 256"}) == []
