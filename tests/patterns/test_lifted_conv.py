"""A separable convolution (a row pass and a column pass, each block staging its tile and an
R-pixel halo in shared memory, halo pixels past the image stored as 0) with its taps in a
`__constant__` table the host fills by `cudaMemcpyToSymbol`. The table is an input of the
inferred task (left as the zeros static storage starts with, every output would be 0 and the
check would compare zeros); each pass lifts to a window whose loads past the image read zero
(`zeropad(img)[i, j + k - 4]`) and emits as a stencil with a weight tensor. The kernel is ours
(`tests/data/separable_conv.cu`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import migrator.nki as mn
from migrator.contract import load_spec
from migrator.cuda.frontend import analyze_file
from migrator.infer import infer_spec
from migrator.lift import lift_task
from migrator.lift.program import Assign, Expr, IndexMap, Program, Term, evaluate
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "separable_conv.cu"
CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def test_the_constant_table_is_an_input_of_the_task() -> None:
    tu = analyze_file(KERNEL)
    spec = infer_spec(tu, tu.kernel("conv_rows"))
    t = spec.tensor_named("taps")
    assert (t.role, t.dtype, t.shape, t.cuda_param) == ("in", "float32", ["9"], "taps")


def test_a_table_initialised_in_the_source_stays_a_constant() -> None:
    tu = analyze_file(CORPUS / "stencil_1d.cu")
    spec = infer_spec(tu, tu.kernel("stencil_1d_kernel"))
    assert "c_weights" not in {t.cuda_param for t in spec.tensors}


PASSES = [("conv_rows", "zeropad(img)[i, j + k - 4]"), ("conv_cols", "zeropad(mid)[i + k - 4, j]")]


@pytest.mark.parametrize(("kernel", "tap"), PASSES)
def test_each_pass_lifts_to_a_zero_padded_window(tmp_path: Path, kernel: str, tap: str) -> None:
    m = migrate(KERNEL, kernel=kernel, out_dir=tmp_path, check=False)
    spec = load_spec(next(tmp_path.glob(f"{kernel}.inferred.toml")))
    result = lift_task(spec)
    assert result.ok and result.program is not None, result.render()
    text = result.program.render()
    assert tap in text and "taps[k]" in text and "sum_{k < 9}" in text
    assert m.kernels[0].status == "complete"


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_both_passes_migrate_and_match_numpy(tmp_path: Path, api: str) -> None:
    m = migrate(KERNEL, out_dir=tmp_path, nki_api=api)
    by_name = {k.kernel: k for k in m.kernels}
    for k in by_name.values():
        assert (k.family, k.status) == ("stencil", "complete"), k.diagnostics
        assert k.check is not None and k.check.ok
    # the column pass (a row offset per tap) as a banded product on TensorE; the row pass
    # (one row offset) as taps sliced from one load
    cols_src, rows_src = by_name["conv_cols"].nki_source or "", by_name["conv_rows"].nki_source
    assert "band_a" in cols_src and ("matmul(band_a" in cols_src or "nc_matmul(" in cols_src)
    assert "band_a" not in (rows_src or "")
    # the NKI kernels against a numpy convolution of our own, at a ragged size
    rng = np.random.default_rng(3)
    img = rng.standard_normal((45, 77)).astype(np.float32)
    taps = rng.standard_normal(9).astype(np.float32)
    padded = np.pad(img.astype(np.float64), 4)
    want_mid = sum(taps[t] * padded[4:-4, t : t + 77] for t in range(9))
    rows = mn.load_kernel_module(by_name["conv_rows"].nki_file).conv_rows
    cols = mn.load_kernel_module(by_name["conv_cols"].nki_file).conv_cols
    mid = rows(img, taps)
    np.testing.assert_allclose(mid, want_mid, rtol=1e-5, atol=1e-5)
    want = sum(taps[t] * np.pad(want_mid, 4)[t : t + 45, 4:-4] for t in range(9))
    np.testing.assert_allclose(cols(mid, taps), want, rtol=1e-5, atol=1e-4)


def test_a_padded_load_reads_its_pad_value_outside_the_tensor() -> None:
    k_idx = IndexMap(terms=[Term(coef=1, var="i"), Term(coef=1, var="k")], const=-1)
    body = Expr(kind="load", tensor="x", index=[k_idx], pad=0.0)
    red = Expr(kind="reduce", op="sum", var="k", extent=3, args=[body])
    prog = Program(assigns=[Assign(tensor="y", vars=["i"], expr=red)])
    x = np.arange(1.0, 6.0)
    got = evaluate(prog, {"x": x}, {"x": (5,), "y": (5,)}, {}, {})["y"]
    np.testing.assert_array_equal(got, [3.0, 6.0, 9.0, 12.0, 9.0])
    assert "zeropad(x)[i + k - 1]" in prog.render()
