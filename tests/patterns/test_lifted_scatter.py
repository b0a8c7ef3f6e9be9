"""Scatter-adds of rows emitted as atomic read-modify-write DMAs: per tile of 128 rows of the
scattered tensor, the rows go to the row each id names (`nl.atomic_rmw` with the id tile on the
partition axis, repeated ids summed) and to their position modulo the output's rows for a sum
over the leading axis. The kernels are ours (`tests/data/embedding_backward.cu`); llm.c's
encoder_backward kernels 1 and 2 take the same route."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrator.patterns.lifted import _NoFit
from migrator.patterns.lifted_scatter import _check, _part

from migrator.contract import TaskSpec
from migrator.lift.program import Assign, Expr, IndexMap, Term
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "embedding_backward.cu"


@pytest.mark.parametrize("kernel", ["embedding_backward", "embedding_backward_cols"])
def test_scatter_adds_migrate_and_check(tmp_path: Path, kernel: str) -> None:
    (k,) = migrate(KERNEL, kernel=kernel, out_dir=tmp_path).kernels
    assert (k.status, k.family) == ("complete", "scatter"), [d.message for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    src = k.nki_source or ""
    assert "nl.atomic_rmw(d_table_rows[ids0[i_q, 0], i_f], value=rows_t" in src
    assert "nl.sequential_range" in src  # tiles add into the same rows: no affine loop
    assert not any(d.id in ("C2N2002", "C2N2003") for d in k.diagnostics)
    if kernel == "embedding_backward":  # the position rows by iota modulo the positions
        assert "nl.mod(nisa.iota(i_p, dtype=nl.int32), R1" in src


@pytest.mark.parametrize("kernel", ["embedding_backward", "embedding_backward_cols"])
def test_the_new_dialect_sums_repeated_ids_on_tensor_e(tmp_path: Path, kernel: str) -> None:
    """The new dialect's scatter DMA takes unique indices only: the rows are summed by one-hot
    matmuls instead (repeated ids add up in PSUM)."""
    (k,) = migrate(KERNEL, kernel=kernel, out_dir=tmp_path, nki_api="new").kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    src = k.nki_source or ""
    assert "nisa.nc_matmul(dst=acc[0:vs, 0:cs], stationary=hot[0:ks, 0:vs]" in src
    assert "nl.atomic_rmw(" not in src and "nisa.dma_compute(" not in src


def _spec() -> TaskSpec:
    return TaskSpec.model_validate({
        "kernel": {"name": "k"}, "sizes": {"B": 3, "T": 5, "C": 4},
        "size_sets": [{"B": 2, "T": 7, "C": 3}],
        "tensors": [{"name": "x", "role": "in", "dtype": "float32", "shape": ["B * T", "C"]},
                    {"name": "pos", "role": "inout", "dtype": "float32", "shape": ["T", "C"]}],
        "launch": {"grid": [1], "block": [32]},
    })  # fmt: skip


def _pos_sum(row: IndexMap) -> Assign:
    """`pos[i, j] = pos[i, j] + sum_{k < B} x[row, j]`."""
    j = IndexMap(terms=[Term(coef=1, var="j")])
    own = Expr(kind="load", tensor="pos", index=[IndexMap(terms=[Term(coef=1, var="i")]), j])
    x = Expr(kind="load", tensor="x", index=[row, j])
    red = Expr(kind="reduce", op="sum", var="k", extent="B", args=[x])
    return Assign(tensor="pos", vars=["i", "j"], expr=Expr(kind="op", op="+", args=[own, red]))


def test_a_sum_over_the_leading_rows_is_checked_against_its_model() -> None:
    """`x[T*k + i, j]` is the row k * T + i: rows added at their position modulo T. One row
    further (`T*k + i + 1`) is no such scatter, and the rule refuses it rather than emit the
    unshifted one."""
    spec = _spec()
    good = _pos_sum(IndexMap(terms=[Term(coef="T", var="k"), Term(coef=1, var="i")]))
    part = _part(good, spec)
    assert part["kind"] == "mod"
    _check(part, spec, "C", spec.tensor_named("x"))
    shifted = _pos_sum(IndexMap(terms=[Term(coef="T", var="k"), Term(coef=1, var="i")], const=1))
    with pytest.raises(_NoFit):
        _check(_part(shifted, spec), spec, "C", spec.tensor_named("x"))


WEIGHTED_HISTOGRAM = """#include <cuda_runtime.h>
// a weighted histogram: each key's bin gets its weight (a segment sum by key)
__global__ void weighted_hist(float* hist, const int* keys, const float* w, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[keys[i]], w[i]);
}
void launch(float* hist, const int* keys, const float* w, int n) {
    weighted_hist<<<(n + 255) / 256, 256>>>(hist, keys, w, n);
}
"""


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_weighted_histogram_is_a_scatter_of_one_element_rows(tmp_path: Path, api: str) -> None:
    (tmp_path / "wh.cu").write_text(WEIGHTED_HISTOGRAM)
    (k,) = migrate(tmp_path / "wh.cu", out_dir=tmp_path / api, nki_api=api).kernels
    assert (k.status, k.family) == ("complete", "scatter"), [d.message for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    assert k.lifted is not None and k.lifted.program is not None
    assert (
        k.lifted.program.render() == "hist[i] = hist[i] + (sum_{k < n} ((keys[k] == i ? w[k] : 0)))"
    )
