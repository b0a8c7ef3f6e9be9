"""Reads past a shared array whose values the kernel drops (one partial per warp in
`part[WARPS]`, then every lane of warp 0 loads `part[lane]`): the oracle reruns with two fills
for those reads and accepts the run only where the outputs do not change; a read whose value
reaches an output stays an out-of-bounds error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from migrator.api import clear_caches
from migrator.contract import load_spec
from migrator.cuda.interp.findings import InterpError
from migrator.cuda.interp.spec_run import run_spec_full
from migrator.migration import migrate

KERNEL = """#define WARPS 4
__global__ void row_total(const float* x, float* y, int C) {
  __shared__ float part[WARPS];
  int lane = threadIdx.x % 32;
  float v = 0.0f;
  for (int c = threadIdx.x; c < C; c += 128) v += x[blockIdx.x * C + c];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
  if (lane == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float s = part[lane];  // lanes past WARPS read past the array
    for (int off = WIDTH; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
    if (lane == 0) y[blockIdx.x] = s;
  }
}
void launch(const float* x, float* y, int N, int C) {
  row_total<<<N, 128>>>(x, y, C);
}
"""

SPEC = """[kernel]
name = "row_total"
source = "total.cu"
family = "rows"
[sizes]
N = 40
C = 300
[[tensors]]
name = "x"
role = "in"
dtype = "float32"
shape = ["N", "C"]
[[tensors]]
name = "y"
role = "out"
dtype = "float32"
shape = ["N"]
[[scalars]]
name = "C"
dtype = "int32"
size = "C"
[launch]
grid = ["N"]
block = [128]
"""


def _task(tmp_path: Path, width: int) -> Path:
    (tmp_path / "total.cu").write_text(KERNEL.replace("WIDTH", str(width)))
    (tmp_path / "total.toml").write_text(SPEC)
    return tmp_path / "total.toml"


def test_an_over_read_whose_values_are_dropped_is_run_and_reported(tmp_path: Path) -> None:
    clear_caches()
    spec = load_spec(_task(tmp_path, 2))  # lanes 0..3 combine: the over-read lanes never do
    run = run_spec_full(spec, {"N": 40, "C": 300})
    want = run.inputs["x"].astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(run.outputs[0], want, rtol=1e-5, atol=1e-4)
    assert [f.kind for f in run.result.findings] == ["out_of_bounds"]
    assert "read of shared buffer 'part'" in run.result.findings[0].message


def test_an_over_read_that_reaches_an_output_stays_an_error(tmp_path: Path) -> None:
    clear_caches()
    spec = load_spec(_task(tmp_path, 16))  # all 32 lanes combine: the garbage is summed
    with pytest.raises(InterpError, match="out-of-bounds read of shared buffer 'part'"):
        run_spec_full(spec, {"N": 40, "C": 300})


def test_the_migration_compares_and_says_so(tmp_path: Path) -> None:
    clear_caches()
    task = _task(tmp_path, 2)
    result = migrate(task.with_suffix(".cu"), out_dir=tmp_path / "out")
    (k,) = result.kernels
    assert k.check is not None and k.check.ok, k.diagnostics
    assert "C2N2017" in {d.id for d in k.diagnostics}
