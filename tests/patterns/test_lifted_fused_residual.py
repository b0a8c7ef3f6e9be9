"""A fused residual add and norm (llm.c's `fused_residual_forward2` shape): the residual sum
is stored, then read back for the row's statistics. Without a spec the residual is inferred
an output (its old values reach nothing the kernel computes), and the row program stores the
plain map beside the normalised row."""

from __future__ import annotations

import shutil
from pathlib import Path

from migrator.contract import load_spec
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "residual_rmsnorm.cu"


def test_a_residual_written_then_reread_is_an_output_and_migrates_as_rows(
    tmp_path: Path,
) -> None:
    shutil.copy(KERNEL, tmp_path / KERNEL.name)
    (k,) = migrate(tmp_path / KERNEL.name, out_dir=tmp_path / "out").kernels
    spec = load_spec(next((tmp_path / "out").glob("*.inferred.toml")))
    assert {t.name: t.role for t in spec.tensors}["res"] == "out"
    assert (k.family, k.status) == ("rows", "complete"), k.diagnostics
    assert k.check is not None and k.check.ok
    src = k.nki_source or ""
    assert "def residual_rmsnorm(a, b, w):" in src  # res is no longer an argument


def test_an_in_place_update_stays_inout(tmp_path: Path) -> None:
    """`x[i] = x[i] * s`: the old values are what the kernel computes from."""
    (tmp_path / "scale.cu").write_text(
        "__global__ void scale(float* x, const float* s, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) { x[i] = x[i] * s[0]; x[i] = x[i] + 1.0f; }\n"
        "}\n"
        "void run(float* x, const float* s, int n) { scale<<<(n + 255) / 256, 256>>>(x, s, n); }\n"
    )  # fmt: skip
    from migrator.cuda.frontend import analyze_file
    from migrator.infer import infer_spec

    tu = analyze_file(tmp_path / "scale.cu")
    spec = infer_spec(tu, tu.global_kernels[0])
    assert {t.name: t.role for t in spec.tensors}["x"] == "inout"


def test_old_values_read_only_to_be_zeroed_keep_the_tensor_inout(tmp_path: Path) -> None:
    """`0 * y[i]` reads the old value for nothing: as an output (NaN at first) the original
    would compute NaN there, so the tensor stays inout."""
    (tmp_path / "zeroed.cu").write_text(
        "__global__ void zeroed(float* y, const float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i >= n) return;\n"
        "  float keep = 0.0f * y[i];\n"
        "  y[i] = x[i];\n"
        "  y[i] = y[i] + keep;\n"
        "}\n"
        "void run(float* y, const float* x, int n) { zeroed<<<(n + 255) / 256, 256>>>(y, x, n); }\n"
    )  # fmt: skip
    from migrator.cuda.frontend import analyze_file
    from migrator.infer import infer_spec

    tu = analyze_file(tmp_path / "zeroed.cu")
    spec = infer_spec(tu, tu.global_kernels[0])
    assert {t.name: t.role for t in spec.tensors}["y"] == "inout"
