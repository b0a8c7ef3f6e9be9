"""Overloaded `__device__` functions are chosen by argument types, not by count alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from migrator.cuda.interp.runner import run_kernel
from migrator.cuda.parse import parse_file

SRC = """
#include <cuda_fp16.h>
__device__ half twice(half x) { return x + x; }      // first definition: the half overload
__device__ float twice(float x) { return 3.0f * x; }  // a different body, to tell them apart
__global__ void k(const float* a, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = twice(a[i]);
}
"""


def test_float_argument_calls_the_float_overload(tmp_path: Path) -> None:
    f = tmp_path / "k.cu"
    f.write_text(SRC)
    a = np.arange(8, dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    r = run_kernel(parse_file(f), "k", (1, 1, 1), (8, 1, 1), {"a": a, "out": out, "n": 8})
    np.testing.assert_array_equal(r.outputs.get("out", out), 3.0 * a)
