"""Which elements of an output the original never wrote: read from the run's own record of its
stores where no stored element is NaN; otherwise a second run with another fill tells a NaN
the kernel computed from the fill it left."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from migrator.api import clear_caches
from migrator.contract import load_spec
from migrator.cuda.interp import spec_run

CAUSAL = """
    // rows of a lower triangle: elements above the diagonal are never written
    __global__ void tri(const float* x, float* y, int N) {
        int r = blockIdx.x, c = threadIdx.x;
        if (c <= r) y[r * N + c] = x[r * N + c] OP;
    }
"""
SPEC = """
    [kernel]
    name = "tri"
    [sizes]
    N = 8
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["N", "N"]
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["N", "N"]
    [[scalars]]
    name = "N"
    size = "N"
    [launch]
    grid = ["N"]
    block = ["N"]
"""


def _spec(tmp_path: Path, op: str) -> object:
    (tmp_path / "tri.cu").write_text(textwrap.dedent(CAUSAL).replace("OP", op))
    (tmp_path / "tri.toml").write_text(textwrap.dedent(SPEC))
    return load_spec(tmp_path / "tri.toml")


@pytest.mark.parametrize(("op", "reruns"), [(" * 2.0f", 0), (" * 2.0f + (c == 0 ? NAN : 0.0f)", 2)])
def test_unwritten_elements_from_the_runs_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str, reruns: int
) -> None:
    spec = _spec(tmp_path, op)
    clear_caches()
    run = spec_run.run_spec_full(spec, {"N": 8}, seed=1)
    stored = run.result.stored["y"].reshape(8, 8)
    np.testing.assert_array_equal(stored, np.tri(8, dtype=bool))
    calls: list[float] = []
    real = spec_run.run_spec_full

    def counting(*a: object, **k: object) -> object:
        calls.append(float(k.get("out_fill", np.nan)))  # type: ignore[arg-type]
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(spec_run, "run_spec_full", counting)
    (got,) = spec_run.unwritten_elements(spec, {"N": 8}, 1, run.outputs, None, run.result.stored)
    # a NaN the kernel stored (column 0) needs a run with another fill, and one with zeroed
    # fresh memory (computed, or an uninitialised value stored?)
    assert len(calls) == reruns
    # never written: above the diagonal, whichever way it was found (a computed NaN is not)
    assert got is not None
    np.testing.assert_array_equal(got, ~np.tri(8, dtype=bool))
    (slow,) = spec_run.unwritten_elements(spec, {"N": 8}, 1, run.outputs)
    np.testing.assert_array_equal(got, slow)


PACKED = """
    // a row of V values moved in 4-wide packs: a pack's lanes past V are never set, yet the
    // whole pack is stored (a GPU stores whatever the registers held: undefined values)
    struct pack4 { float v[4]; };
    __global__ void scale_rows(const float* x, float* y, int V, int P) {
        int r = blockIdx.x;
        for (int i = threadIdx.x; i < (V + 3) / 4; i += blockDim.x) {
            pack4 p;
            for (int k = 0; k < 4; ++k) {
                int e = i * 4 + k;
                if (e >= V) continue;
                p.v[k] = 2.0f * x[r * P + e];
            }
            *reinterpret_cast<pack4*>(&y[r * P + i * 4]) = p;
        }
    }
"""
PACKED_SPEC = """
    [kernel]
    name = "scale_rows"
    [sizes]
    R = 3
    V = 6
    P = 12
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["R", "P"]
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["R", "P"]
    [[scalars]]
    name = "V"
    size = "V"
    [[scalars]]
    name = "P"
    size = "P"
    [launch]
    grid = ["R"]
    block = ["32"]
"""


def test_elements_stored_from_uninitialised_locals_are_undefined(tmp_path: Path) -> None:
    """Columns 6 and 7 of each row are stored from the unset lanes of the last pack: their
    values are the uninitialised memory's (NaN here, a number with zeroed memory), so they are
    left out like the never-written columns 8..11; columns 0..5 are compared."""
    (tmp_path / "rows.cu").write_text(textwrap.dedent(PACKED))
    (tmp_path / "rows.toml").write_text(textwrap.dedent(PACKED_SPEC))
    spec = load_spec(tmp_path / "rows.toml")
    clear_caches()
    run = spec_run.run_spec_full(spec, None, seed=2)
    (y,) = run.outputs
    assert np.isnan(y[:, 6:]).all() and not np.isnan(y[:, :6]).any()
    (got,) = spec_run.unwritten_elements(spec, spec.sizes, 2, run.outputs, None, run.result.stored)
    assert got is not None
    want = np.zeros((3, 12), dtype=bool)
    want[:, 6:] = True
    np.testing.assert_array_equal(got, want)


FLOOR_GRID = """
    // an integer copy launched in whole tiles of 4 (`grid(N / 4)` on the host): a ragged N's
    // last elements are never written, and an int holds no NaN to show it
    __global__ void copy_tiles(const int* x, int* y, int N) {
        int i = blockIdx.x * 4 + threadIdx.x;
        if (i < N) y[i] = x[i] + 1;
    }
"""
FLOOR_SPEC = """
    [kernel]
    name = "copy_tiles"
    [sizes]
    N = 10
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["N"]
    dtype = "int32"
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["N"]
    dtype = "int32"
    [[scalars]]
    name = "N"
    size = "N"
    [launch]
    grid = ["N / 4"]
    block = ["4"]
"""


def test_an_integer_outputs_unwritten_elements_are_those_never_stored(tmp_path: Path) -> None:
    """Elements 8 and 9 hold the zeros they started as: unwritten, read from the run's stores
    (not compared); an element the kernel wrote as 0 (x = -1) is written."""
    (tmp_path / "tiles.cu").write_text(textwrap.dedent(FLOOR_GRID))
    (tmp_path / "tiles.toml").write_text(textwrap.dedent(FLOOR_SPEC))
    spec = load_spec(tmp_path / "tiles.toml")
    clear_caches()
    x = np.arange(-1, 9, dtype=np.int32)
    run = spec_run.run_spec_full(spec, None, seed=0, inputs={"x": x})
    (y,) = run.outputs
    np.testing.assert_array_equal(y, [0, 1, 2, 3, 4, 5, 6, 7, 0, 0])
    (got,) = spec_run.unwritten_elements(spec, spec.sizes, 0, run.outputs, None, run.result.stored)
    assert got is not None
    np.testing.assert_array_equal(got, np.arange(10) >= 8)
    # every element stored: nothing to leave out
    (whole,) = spec_run.unwritten_elements(spec, {"N": 12}, 0, run.outputs, None,
                                           {"y": np.ones(10, dtype=bool)})  # fmt: skip
    assert whole is None
