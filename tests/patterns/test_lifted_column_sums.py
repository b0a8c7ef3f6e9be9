"""A row program with sums down the columns beside it (a layer norm's backward: the input's
gradient row by row, the gain's and the shift's gradients summed over every row by atomics):
one NKI kernel whose row tiles also feed ones-vector matmuls that accumulate the column sums in
PSUM. The kernel is ours (`tests/data/rows_and_columns.cu`); llm.c's layernorm_backward
kernels 1 and 2 take the same route."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrator.patterns.lifted import _as_row_tile, _column_sum, _NoFit

from migrator.lift.program import Assign, Expr, IndexMap, Term
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "rows_and_columns.cu"


def _bf16(tmp_path: Path) -> Path:
    src = KERNEL.read_text()
    src = src.replace("#include <cuda_runtime.h>", "#include <cuda_bf16.h>")
    src = src.replace(
        "float *dx, *dgain, *dshift, *dy, *xhat, *gain, *inv_std;",
        "__nv_bfloat16 *dx, *dy, *xhat, *gain, *inv_std;\n    float *dgain, *dshift;",
    )
    src = src.replace("rows_and_columns<float>", "rows_and_columns<__nv_bfloat16>")
    out = tmp_path / "rows_and_columns_bf16.cu"
    out.write_text(src)
    return out


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_rows_with_column_sums_migrate_and_check(tmp_path: Path, api: str) -> None:
    m = migrate(KERNEL, out_dir=tmp_path, nki_api=api)
    k = m.kernels[0]
    assert k.status == "complete" and k.check is not None and k.check.ok
    nki = Path(k.nki_file).read_text()  # type: ignore[arg-type]
    assert nki.count("ones") >= 3  # the two column sums are ones-vector matmuls
    assert ("nc_matmul" if api == "new" else "nl.matmul(ones") in nki


def test_low_precision_rows_sum_their_columns_in_fp32(tmp_path: Path) -> None:
    """bf16 rows, fp32 column sums (the CUDA original adds `(float)x` terms): the row tiles
    are taken in fp32, or thousands of terms rounded to bf16 first drift past the sums."""
    m = migrate(_bf16(tmp_path), out_dir=tmp_path)
    k = m.kernels[0]
    assert k.status == "complete" and k.check is not None and k.check.ok
    assert "dtype=nl.float32)" in Path(k.nki_file).read_text()  # type: ignore[arg-type]


def _ld(t: str, *idx: IndexMap) -> Expr:
    return Expr(kind="load", tensor=t, index=list(idx))


def _m(*terms: tuple[str, object]) -> IndexMap:
    return IndexMap(terms=[Term(var=v, coef=c) for v, c in terms])  # type: ignore[arg-type]


def test_column_sum_terms_read_rows_columns_and_row_values() -> None:
    body = Expr(kind="op", op="*", args=[_ld("dy", _m(("k", 1)), _m(("j", 1))),
                                         _ld("s", _m(("k", 1)))])  # fmt: skip
    red = Expr(kind="reduce", op="sum", var="k", extent="R", args=[body])
    a = Assign(tensor="g", vars=["j"], expr=Expr(kind="op", op="+", args=[
        _ld("g", _m(("j", 1))), red]))  # fmt: skip
    found = _column_sum(a)
    assert found is not None and found[1] is not None  # the old value is carried
    seen: set[str] = set()
    term = _as_row_tile(found[0], "j", None, seen)
    assert term.render() == "dy[i, j] * s[i]"
    # flat rows of width C (`dy[j + C*k]`) are the same row element
    flat = _ld("dy", _m(("j", 1), ("k", "C")))
    assert _as_row_tile(flat, "j", "C", seen).render() == "dy[i, j]" and "dy" in seen
    # a neighbouring column is no element of the row tile's column
    with pytest.raises(_NoFit):
        _as_row_tile(_ld("dy", _m(("k", 1)), IndexMap(terms=[Term(var="j", coef=1)], const=1)),
                     "j", None, set())  # fmt: skip


BIAS_3D = Path(__file__).resolve().parents[1] / "data" / "bias_grad_3d.cu"


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_column_sum_over_leading_axes_reads_the_rows_of_a_view(tmp_path: Path, api: str) -> None:
    """`grad[(b * T + s) * C + c]` summed over b and s: the [B, T, C] tensor's leading axes are
    the summed rows (`grad[k // T, k % T, c]`), read through its [B * T, C] view."""
    k = migrate(BIAS_3D, out_dir=tmp_path, nki_api=api).kernels[0]
    assert (k.status, k.family) == ("complete", "reduction"), [d.message for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    assert "grad.reshape((batch * steps, ch))" in (k.nki_source or "")


def test_leading_axes_must_unravel_the_summed_index_in_order() -> None:
    """`x[k % B, k // B, j]` runs the axes in the other order: no [rows, C] view reads it."""
    from migrator.patterns.lifted import _leading_axes_as_rows

    from migrator.contract import TaskSpec

    spec = TaskSpec.model_validate({
        "kernel": {"name": "k"}, "sizes": {"B": 3, "T": 5, "C": 7},
        "tensors": [{"name": "x", "role": "in", "dtype": "float32", "shape": ["B", "T", "C"]},
                    {"name": "y", "role": "out", "dtype": "float32", "shape": ["C"]}],
        "launch": {"grid": [1], "block": [32]},
    })  # fmt: skip

    def ld(*maps: IndexMap) -> Expr:
        return _ld("x", *maps, _m(("j", 1)))

    swapped = [IndexMap(terms=[Term(var="k", coef=1, mod="B")]),
               IndexMap(terms=[Term(var="k", coef=1, div="B")])]  # fmt: skip
    body, views = _leading_axes_as_rows(ld(*swapped), "k", "j", spec, None)  # type: ignore[arg-type]
    assert views == {} and body == ld(*swapped)  # left as it is: the rule then refuses it
