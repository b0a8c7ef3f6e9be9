"""The CUDA oracle's results are cached per task and trial: a further candidate of the same
task reuses them, and any change to the source or the spec is a different entry."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from migrator.contract import load_spec
from migrator.score import score
from migrator.score.oracle_cache import OracleCache, task_key
from migrator.score.protocol import make_trial_inputs, plan_trials, run_oracle

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def test_a_further_candidate_reuses_the_oracle(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    expert = CORPUS / "expert" / "vector_add_expert.py"
    first = score(CORPUS / "vector_add.cu", expert, seeds=1, reference=None, oracle_cache=cache)
    entries = sorted(cache.rglob("*.npz"))
    assert len(entries) == first.numerics.trials  # type: ignore[union-attr]
    again = score(CORPUS / "vector_add.cu", expert, seeds=1, reference=None, oracle_cache=cache)
    assert sorted(cache.rglob("*.npz")) == entries
    assert again.verdict == first.verdict == "pass" and again.score == first.score
    assert again.timing.oracle_s < first.timing.oracle_s


def test_entries_hold_the_oracle_exactly_and_follow_the_source(tmp_path: Path) -> None:
    for name in ("vector_add.cu", "vector_add.toml", "vector_add.py"):
        shutil.copy(CORPUS / name, tmp_path / name)
    task = load_spec(tmp_path / "vector_add.toml")
    plan = plan_trials(task, seeds=1)[0]
    oracle = run_oracle(task, plan, make_trial_inputs(task, plan))
    cache = OracleCache(tmp_path / "c", task)
    assert cache.get(plan) is None
    cache.put(plan, oracle)
    got = cache.get(plan)
    assert got is not None and got.error == oracle.error
    assert all(np.array_equal(a, b) for a, b in zip(got.cuda, oracle.cuda, strict=True))
    assert all(np.array_equal(got.inputs[k], v) for k, v in oracle.inputs.items())
    key = task_key(task)
    cu = tmp_path / "vector_add.cu"
    cu.write_text(cu.read_text().replace("c[i] = a[i] + b[i]", "c[i] = a[i] + 2.0f * b[i]"))
    assert task_key(task) != key  # an edited kernel is another task
    other = task.model_copy(update={"sizes": {**task.sizes, "N": task.sizes["N"] + 1}})
    assert task_key(other) != key


def test_bf16_results_are_cached_bit_for_bit(tmp_path: Path) -> None:
    import ml_dtypes

    from migrator.score.protocol import Oracle

    task = load_spec(CORPUS / "vector_add.toml")
    plan = plan_trials(task, seeds=1)[0]
    x = np.array([1.5, -2.25, 3e38], dtype=ml_dtypes.bfloat16)
    cache = OracleCache(tmp_path, task)
    cache.put(plan, Oracle(inputs={"a": x}, cuda=[x], truth=[x.astype(np.float64)]))
    got = cache.get(plan)
    assert got is not None and got.cuda[0].dtype == x.dtype and got.inputs["a"].dtype == x.dtype
    assert got.cuda[0].tobytes() == x.tobytes()
