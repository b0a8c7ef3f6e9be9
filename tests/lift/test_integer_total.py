"""An integer total (int8 values summed into an int32 by warp shuffles and one atomicAdd per
block) lifts to `y = sum_k a[k] + y[0]`, verified exactly; it is not emitted, because
Trainium's engines add in fp32 (exact only below 2**24), and the skeleton says so."""

from __future__ import annotations

from pathlib import Path

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.migration import migrate

KERNEL = """#include <stdint.h>
__global__ void i8_total(const int8_t* a, int32_t* y, int n) {
  __shared__ int32_t part[8];
  int i = blockIdx.x * 256 + threadIdx.x, lane = threadIdx.x % 32;
  int32_t v = i < n ? (int32_t)a[i] : 0;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
  if (lane == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    int32_t s = lane < 8 ? part[lane] : 0;
    for (int off = 4; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
    if (lane == 0) atomicAdd(y, s);
  }
}
"""

SPEC = """[kernel]
name = "i8_total"
source = "i8_total.cu"
family = "reduction"
[sizes]
n = 3000
[[size_sets]]
n = 777
[[tensors]]
name = "a"
role = "in"
dtype = "int8"
shape = ["n"]
[[tensors]]
name = "y"
role = "inout"
dtype = "int32"
shape = ["1"]
[[scalars]]
name = "n"
dtype = "int32"
size = "n"
[launch]
grid = ["(n + 255) / 256"]
block = [256]
"""


def test_an_integer_total_lifts_exactly_and_is_not_emitted(tmp_path: Path) -> None:
    (tmp_path / "i8_total.cu").write_text(KERNEL)
    (tmp_path / "i8_total.toml").write_text(SPEC)
    r = lift_task(load_spec(tmp_path / "i8_total.toml"))
    assert r.ok, r.error
    assert r.program.render() == "y[i] = (sum_{k < n} a[k]) + y[0]"
    result = migrate(tmp_path / "i8_total.cu", out_dir=tmp_path / "out")
    (k,) = result.kernels
    assert k.status == "partial"
    assert any("integer total" in d.message and "2**24" in d.message for d in k.diagnostics)
