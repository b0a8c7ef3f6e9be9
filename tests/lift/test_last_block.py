"""A "last block" reduction (llm.c's layernorm backward kernels 5-7): blocks write partials to
a workspace the caller frees unread, take tickets from a counter kept after them, and the last
block sums the partials. The workspace is `role = "scratch"` in the inferred task: the CUDA
kernel gets it zero-filled, the NKI kernel does not get it, and nothing compares it. The
ticket goes through shared memory that holds floats (read as unsigned): in a traced run that
buffer holds values, so the ticket reads as the number stored. The kernel is ours
(`tests/data/last_block.cu`)."""

from __future__ import annotations

from pathlib import Path

from migrator.contract import load_spec, make_inputs
from migrator.cuda.interp.spec_run import kernel_args
from migrator.lift import lift_task
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "last_block.cu"


def _spec(tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "last_block.cu").write_text(KERNEL.read_text())
    m = migrate(tmp_path / "last_block.cu", out_dir=tmp_path / "out")
    return m, load_spec(next((tmp_path / "out").glob("*.inferred.toml")))


def test_the_workspace_is_scratch_and_the_migration_leaves_it_out(tmp_path: Path) -> None:
    m, spec = _spec(tmp_path)
    work = spec.tensor_named("work")
    assert work.role == "scratch"
    assert [t.name for t in spec.inputs_in_order] == ["x"]
    assert [t.name for t in spec.outputs_in_order] == ["sums"]
    (k,) = m.kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert "def column_sums_last_block(x):" in (k.nki_source or "")
    # the CUDA kernel still gets it, filled as the host leaves it
    sizes = dict(spec.sizes)
    args = kernel_args(spec, sizes, make_inputs(spec, sizes))
    assert args["work"].shape == spec.shape_of(work, sizes) and not args["work"].any()


def test_the_last_block_sums_lift(tmp_path: Path) -> None:
    _, spec = _spec(tmp_path)
    result = lift_task(spec)
    assert result.ok and result.program is not None, result.render()
    assert result.program.render() == "sums[i] = sum_{k < rows} x[k, i]"
