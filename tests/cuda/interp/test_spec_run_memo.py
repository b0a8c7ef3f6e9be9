"""The memo of recent original runs: keyed by what decides the result, never shared state."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from migrator.api import clear_caches
from migrator.contract import load_spec
from migrator.cuda.interp import spec_run
from migrator.cuda.interp.findings import OutOfBoundsError

CORPUS = Path(__file__).resolve().parents[3] / "corpus"


def test_a_remembered_run_is_the_same_run_and_each_caller_owns_its_arrays(tmp_path: Path) -> None:
    for ext in ("cu", "toml"):
        shutil.copy(CORPUS / f"vector_add.{ext}", tmp_path / f"vector_add.{ext}")
    spec = load_spec(tmp_path / "vector_add.toml")
    sizes = spec.all_size_sets()[-1]
    clear_caches()
    first = spec_run.run_spec_full(spec, sizes, seed=5)
    assert len(spec_run._RUNS) == 1
    again = spec_run.run_spec_full(spec, sizes, seed=5)
    np.testing.assert_array_equal(first.outputs[0], again.outputs[0])
    again.outputs[0][:] = -1.0  # a caller's edit stays its own
    third = spec_run.run_spec_full(spec, sizes, seed=5)
    np.testing.assert_array_equal(first.outputs[0], third.outputs[0])
    # other inputs (seed), or an edited kernel, are other runs
    other = spec_run.run_spec_full(spec, sizes, seed=6)
    assert not np.array_equal(first.outputs[0], other.outputs[0])
    src = tmp_path / "vector_add.cu"
    src.write_text(src.read_text().replace("a[i] + b[i]", "a[i] - b[i]"))
    edited = spec_run.run_spec_full(spec, sizes, seed=5)
    assert not np.array_equal(first.outputs[0], edited.outputs[0])
    clear_caches()
    assert not spec_run._RUNS and not spec_run._PARSED


def test_a_run_that_failed_fails_again_from_the_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that raised (a kernel reaching past a ragged size) is asked again by the lift's
    verification, a view's and the check: the same error comes back, span and kernel
    included, without running the kernel again; an edited kernel runs anew."""
    for ext in ("cu", "toml"):
        shutil.copy(CORPUS / f"vector_add.{ext}", tmp_path / f"vector_add.{ext}")
    src = tmp_path / "vector_add.cu"
    src.write_text(src.read_text().replace("if (i < n)", "if (i <= n)"))
    spec = load_spec(tmp_path / "vector_add.toml")
    sizes = spec.all_size_sets()[-1]
    clear_caches()
    runs: list[int] = []
    real = spec_run.run_kernel

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(spec_run, "run_kernel", counted)
    with pytest.raises(OutOfBoundsError) as first:
        spec_run.run_spec_full(spec, sizes, seed=5)
    assert len(runs) == 1
    with pytest.raises(OutOfBoundsError) as again:
        spec_run.run_spec_full(spec, sizes, seed=5)
    assert len(runs) == 1
    assert str(again.value) == str(first.value) and again.value is not first.value
    assert again.value.span == first.value.span and again.value.kernel == "vector_add_kernel"
    src.write_text(src.read_text().replace("if (i <= n)", "if (i < n)"))
    spec_run.run_spec_full(spec, sizes, seed=5)  # fixed: a run of its own, and it passes
    assert len(runs) == 2
    clear_caches()
