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


@pytest.mark.parametrize(("op", "reruns"), [(" * 2.0f", 0), (" * 2.0f + (c == 0 ? NAN : 0.0f)", 1)])
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
    assert len(calls) == reruns  # a NaN the kernel stored (column 0) needs the second run
    # never written: above the diagonal, whichever way it was found (a computed NaN is not)
    assert got is not None
    np.testing.assert_array_equal(got, ~np.tri(8, dtype=bool))
    (slow,) = spec_run.unwritten_elements(spec, {"N": 8}, 1, run.outputs)
    np.testing.assert_array_equal(got, slow)
