"""A run leaves nothing behind for the cycle collector: its machines and arguments are freed
by reference counting as it returns. A traced run's millions of values otherwise stayed alive
until a collection walked them all (a third of a second, once per lifted kernel)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from migrator.cuda.interp import run_kernel
from migrator.cuda.parse import parse_text

KERNEL = "__global__ void k(const float* x, float* y) { y[threadIdx.x] = 2.0f * x[threadIdx.x]; }"
# a shuffle: its lane picking once was a closure that called itself, holding the machine
SHUFFLE = (
    "__global__ void k(const float* x, float* y) {\n"
    "  float v = x[threadIdx.x];\n"
    "  v += __shfl_xor_sync(0xffffffff, v, 1) - v;\n"
    "  y[threadIdx.x] = 2.0f * v + 0.0f * __shfl_down_sync(0xffffffff, v, 0);\n}"
)
# a file-scope declaration the interpreter cannot evaluate: kept as an error, raised only
# where a kernel uses the name (its traceback would hold the run's frames)
BROKEN_GLOBAL = "int host_only(int x);\n__device__ int broken = host_only(3);\n"


@pytest.mark.parametrize(
    ("prefix", "kernel"), [("", KERNEL), (BROKEN_GLOBAL, KERNEL), ("", SHUFFLE)]
)
def test_a_run_frees_its_machines_and_arguments_without_the_collector(
    prefix: str, kernel: str
) -> None:
    parsed = parse_text(prefix + kernel, "k.cu")
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    alive = weakref.ref(x)
    was = gc.isenabled()
    gc.disable()
    try:
        run_kernel(parsed, "k", 2, 32, {"x": x, "y": y})
        del x
        assert alive() is None
        assert not [o for o in gc.get_objects() if type(o).__name__ == "Machine"]
    finally:
        if was:
            gc.enable()
    assert y.tolist() == [2.0] * 32 + [0.0] * 32  # both blocks write y[0:32]


def test_a_broken_global_still_fails_where_the_kernel_uses_it() -> None:
    src = BROKEN_GLOBAL + "__global__ void k(int* y) { y[threadIdx.x] = broken; }"
    with pytest.raises(Exception, match="broken"):
        run_kernel(parse_text(src, "k.cu"), "k", 1, 4, {"y": np.zeros(4, np.int32)})
