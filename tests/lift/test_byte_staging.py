"""Traced values staged in shared memory declared as bytes (`extern __shared__ char p[]` viewed
as float4, llm.c's layernorm forward kernel 6 and fused residual kernels): the bytes become
slots of the stored type in a traced run, so the staged values are followed; the same bytes
read as bytes afterwards cannot be, and the lift says so. The kernel is ours
(`tests/data/char_smem_stage.cu`)."""

from __future__ import annotations

from pathlib import Path

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "char_smem_stage.cu"


def _migrate(tmp_path: Path, source: str):  # type: ignore[no-untyped-def]
    (tmp_path / "k.cu").write_text(source)
    m = migrate(tmp_path / "k.cu", out_dir=tmp_path / "out")
    return m.kernels[0], load_spec(next((tmp_path / "out").glob("*.inferred.toml")))


def test_float4_values_staged_in_a_byte_buffer_lift(tmp_path: Path) -> None:
    k, spec = _migrate(tmp_path, KERNEL.read_text())
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    result = lift_task(spec)
    assert result.ok and result.program is not None, result.render()
    assert result.program.render() == "y[i, j] = (gain[j] * x[i, j]) + shift[j]"


def test_staged_values_read_back_as_bytes_are_not_followed(tmp_path: Path) -> None:
    src = KERNEL.read_text().replace(
        "    __syncthreads();\n",
        "    __syncthreads();\n    if (stage[1] == 7) return;  // a byte of a staged float\n",
    )
    _, spec = _migrate(tmp_path, src)
    result = lift_task(spec)
    assert not result.ok
    assert "bytes of traced values in 'stage'" in (result.error or ""), result.render()
