"""The loop nests a thread steps through (`migrator.cuda.steps`), in the task's sizes."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator import api
from migrator.cuda.interp import run_kernel
from migrator.cuda.parse import parse_text
from migrator.cuda.steps import nest_steps, step_nests

SIZES = {"B": "B", "H": "H", "T": "T", "C": "C", "K": "K", "N": "N"}


def _nests(src: str) -> list[tuple[str, ...]]:
    return step_nests(api.inspect("k.cu", text=src).kernels[0], SIZES)


def test_every_block_redoing_every_row_is_a_four_deep_nest() -> None:
    """A bound on an enclosing loop's variable (`k <= r`) takes that loop's trip: T twice."""
    src = """
    __global__ void k(float* out, const float* x, int B, int H, int T) {
        int c = blockIdx.x * blockDim.x + threadIdx.x;
        if (c >= T) return;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; ++h)
                for (int r = c; r < T; r++) {
                    float acc = 0.0f;
                    for (int k = 0; k <= r; k++) acc += x[((b * H + h) * T + r) * T + k];
                    out[((b * H + h) * T + r) * T + c] = acc;
                }
    }"""
    nests = _nests(src)
    assert ("T", "T", "H", "B") in nests
    assert nest_steps(nests, {"B": 4, "H": 8, "T": 32}) == 4 * 8 * 32 * 32


def test_loops_the_threads_stride_through_take_no_steps() -> None:
    """`i += blockDim.x` (and a warp's stride) is the threads' parallel work; a loop bounded by
    a constant adds nothing; a constant step (`k += 8`) and a count-down loop count."""
    src = """
    __global__ void k(float* y, const float* x, int C, int K, int N) {
        for (int i = threadIdx.x; i < C; i += blockDim.x) y[i] = x[i];
        for (int j = 0; j < 8; j++) y[j] += 1.0f;
        float s = 0.0f;
        for (int k = 0; k < K; k += 8) s += x[k];
        for (int n = N - 1; n >= 0; --n) s += x[n];
        y[0] = s;
    }"""
    nests = _nests(src)
    assert sorted(nests) == [("K",), ("N",)]
    assert nest_steps(nests, {"C": 4096, "K": 64, "N": 100}) == 100
    assert nest_steps([], {"C": 4096}) == 1


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.booleans())
def test_a_threads_counted_steps_never_exceed_the_nest(trips: list[int], tri: bool) -> None:
    """The interpreter counts the innermost steps a thread takes: the nest's product exactly
    for rectangular loops, at most it where the innermost runs up to an outer variable."""
    names = ["B", "H", "T"][: len(trips)]
    loops, var = "", None
    for d, n in enumerate(names):
        last = d == len(names) - 1
        bound = f"<= i{d - 1}" if tri and last and var else f"< {n}"
        loops += f"for (int i{d} = 0; i{d} {bound}; i{d}++) "
        var = f"i{d}"
    params = ", ".join(f"int {n}" for n in names)
    body = f"int n = 0; {loops}n++; out[threadIdx.x] = n;"
    src = f"__global__ void k(int* out, {params}) {{ {body} }}"
    sizes = dict(zip(names, trips, strict=True))
    out = np.zeros(4, np.int32)
    res = run_kernel(parse_text(src, "k.cu"), "k", 1, 4, {"out": out, **sizes})
    counted = int(res.outputs["out"][0])
    bound = nest_steps(_nests(src), sizes)
    rectangular = not tri or len(names) == 1
    assert counted == bound if rectangular else counted <= bound
    assert bound == math.prod(trips) or tri
