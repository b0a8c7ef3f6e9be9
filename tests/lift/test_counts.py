"""Counts per bin (histograms): an integer output is fitted as `bincount(g(keys))` for a bin
function of a small family, verified exactly at other sizes, and refused when it is no such
count; the program's coordinate and integer operations evaluate as C computes them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.lift.counts import fit_counts
from migrator.lift.program import Expr, IndexMap, LiftError, Program, Term, evaluate

HEADER = """
    [kernel]
    name = "{name}"
    [sizes]
    N = 1000
    [[size_sets]]
    N = 77
    [[tensors]]
    name = "keys"
    role = "in"
    dtype = "{dtype}"
    shape = ["N"]
    [[tensors]]
    name = "bins"
    role = "{role}"
    dtype = "int32"
    shape = [{bins}]
    [[scalars]]
    name = "n"
    size = "N"
    [launch]
    grid = ["ceil_div(N, 128)"]
    block = [128]
    [inputs.keys]
    dist = "int"
    low = 0
    high = {high}
"""

# one global atomic per key, the bin read straight from the key (LeetCUDA-style)
DIRECT = """
    __global__ void direct(const int* keys, int* bins, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&bins[keys[i]], 1);
    }
"""
# a byte of an unsigned key, counted in shared memory per block and merged (cuda-samples style)
BYTE = """
    #define BINS 256
    __global__ void byte_hist(const unsigned int* keys, int* bins, int n) {
        __shared__ int local[BINS];
        for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
        __syncthreads();
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            atomicAdd(&local[(keys[i] >> 8) & 0xFFu], 1);
        __syncthreads();
        for (int b = threadIdx.x; b < BINS; b += blockDim.x) atomicAdd(&bins[b], local[b]);
    }
"""
# counts every key twice: no histogram of the family (a weight of 2)
DOUBLE = """
    __global__ void double_count(const int* keys, int* bins, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&bins[keys[i] % 16], 2);
    }
"""


def _spec(tmp_path: Path, name: str, src: str, **fields: object):  # type: ignore[no-untyped-def]
    values = {"name": name, "dtype": "int32", "role": "inout", "bins": 64, "high": 64, **fields}
    (tmp_path / f"{name}.cu").write_text(textwrap.dedent(src))
    (tmp_path / f"{name}.toml").write_text(textwrap.dedent(HEADER.format(**values)))
    return load_spec(tmp_path / f"{name}.toml")


def test_a_direct_histogram_lifts_with_the_old_counts(tmp_path: Path) -> None:
    r = lift_task(_spec(tmp_path, "direct", DIRECT))
    assert r.ok, r.render()
    assert r.program is not None
    assert r.program.render() == "bins[i] = bins[i] + (sum_{k < N} ((keys[k] == i ? 1 : 0)))"
    assert all(v.max_abs_error == 0 for v in r.verified)


def test_a_byte_histogram_privatised_in_shared_memory_lifts(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "byte_hist", BYTE, dtype="uint32", role="out", bins=256, high=1 << 20)
    r = lift_task(spec)
    assert r.ok, r.render()
    assert r.program is not None
    assert "((keys[k] >> 8) & 255) == i" in r.program.render()
    assert "bins[i] +" not in r.program.render()  # an `out` tensor: counts from zero


def test_a_weighted_count_is_not_taken_for_a_histogram(tmp_path: Path) -> None:
    r = lift_task(_spec(tmp_path, "double_count", DOUBLE, bins=16, high=1000))
    assert not r.ok
    assert "no count of keys per bin" in (r.error or "")


@settings(max_examples=40, deadline=None)
@given(
    bins=st.integers(2, 70),
    kind=st.sampled_from(["id", "mod", "and", "shr_and"]),
    seed=st.integers(0, 1000),
    carried=st.booleans(),
)
def test_fit_counts_recovers_the_bin_function(
    bins: int, kind: str, seed: int, carried: bool
) -> None:
    rng = np.random.default_rng(seed)
    n = 200
    width = max(1, (bins - 1).bit_length() - 1)  # a mask that fits the bins
    keys = rng.integers(0, bins if kind == "id" else 1 << 20, n)
    g = {"id": keys, "mod": keys % bins, "and": keys & ((1 << width) - 1),
         "shr_and": (keys >> 5) & ((1 << width) - 1)}[kind]  # fmt: skip
    old = rng.integers(0, 50, bins) if carried else None
    counts = np.bincount(g, minlength=bins) + (old if old is not None else 0)
    a = fit_counts("bins", counts, old, {"keys": keys})
    # whatever function it found, it counts these keys exactly as the kernel did
    got = evaluate(Program(assigns=[a]), {"keys": keys.astype(np.float64),
                                          "bins": (old if old is not None else counts) * 1.0},
                   {"bins": (bins,), "keys": (n,)}, {}, {})["bins"]  # fmt: skip
    np.testing.assert_array_equal(got, counts)
    assert ("bins[i] +" in a.render()) == carried


def test_fit_counts_refuses_what_is_no_count() -> None:
    keys = np.arange(10)
    with pytest.raises(LiftError, match="no count of keys"):
        fit_counts("bins", np.array([3, 1, 0, 0]), None, {"keys": keys})  # 4 counted of 10 ...
    with pytest.raises(LiftError, match="2 axes"):
        fit_counts("bins", np.zeros((2, 2), np.int64), None, {"keys": keys})


def test_coordinates_and_c_integer_operations_evaluate_as_c_does() -> None:
    i = IndexMap(terms=[Term(coef=1, var="i")])
    k = Expr(kind="load", tensor="x", index=[IndexMap(terms=[Term(coef=1, var="i")])])

    def op(name: str, c: int) -> Expr:
        return Expr(kind="op", op=name, args=[k, Expr(kind="const", value=c)])

    x = np.array([-7, 7, 300, 1 << 30], dtype=np.int64)
    shapes = {"out": (4,), "x": (4,)}
    for e, want in ((op("mod", 4), np.fmod(x, 4)), (op("and", 6), x & 6), (op("shr", 3), x >> 3),
                    (Expr(kind="coord", index=[i]), np.arange(4))):  # fmt: skip
        p = Program(assigns=[{"tensor": "out", "vars": ["i"], "expr": e}])  # type: ignore[list-item]
        got = evaluate(p, {"x": x}, shapes, {}, {})["out"]
        np.testing.assert_array_equal(got, want)  # C's `%` keeps the dividend's sign: -7 % 4 == -3
