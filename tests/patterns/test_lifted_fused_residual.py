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


def _roles(tmp_path: Path, name: str, body: str, params: str) -> dict[str, str]:
    """The inferred roles of a one-thread-per-element kernel `name(params)` doing `body`."""
    from migrator.cuda.frontend import analyze_file
    from migrator.infer import infer_spec

    args = ", ".join(p.split()[-1].lstrip("*") for p in params.split(","))
    (tmp_path / f"{name}.cu").write_text(
        f"__global__ void {name}({params}) {{\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"{body}}}\n"
        f"void run({params}) {{ {name}<<<(n + 255) / 256, 256>>>({args}); }}\n"
    )
    tu = analyze_file(tmp_path / f"{name}.cu")
    return {t.name: t.role for t in infer_spec(tu, tu.global_kernels[0]).tensors}


def test_an_in_place_update_stays_inout(tmp_path: Path) -> None:
    """`x[i] = x[i] * s`: the old values are what the kernel computes from."""
    body = "  if (i < n) { x[i] = x[i] * s[0]; x[i] = x[i] + 1.0f; }\n"
    roles = _roles(tmp_path, "scale", body, "float* x, const float* s, int n")
    assert roles["x"] == "inout"


def test_old_values_read_only_to_be_zeroed_keep_the_tensor_inout(tmp_path: Path) -> None:
    """`0 * y[i]` reads the old value for nothing: as an output (NaN at first) the original
    would compute NaN there, so the tensor stays inout."""
    body = ("  if (i >= n) return;\n  float keep = 0.0f * y[i];\n  y[i] = x[i];\n"
            "  y[i] = y[i] + keep;\n")  # fmt: skip
    roles = _roles(tmp_path, "zeroed", body, "float* y, const float* x, int n")
    assert roles["y"] == "inout"
