"""Tasks as Parquet (pyarrow and Hugging Face `datasets` read the same rows back exactly), task
validation by mutants, and the `migrate tasks` command end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from migrator import dataset

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


@pytest.fixture(scope="module")
def tasks() -> list[dataset.TaskRecord]:
    # vector_add validated (mutants scored); transpose has 2-D sizes; softmax has an expert kernel
    return [
        dataset.build_task(CORPUS / "vector_add.cu", validate=True),
        dataset.build_task(CORPUS / "transpose_tiled.cu"),
        dataset.build_task(CORPUS / "softmax_row.cu"),
    ]


def test_validation_shows_the_tests_fail_wrong_migrations(tasks: list) -> None:
    v = tasks[0].validation
    assert v is not None and v.ok
    assert v.reference_verdict == "pass" and v.reference_score >= 95
    assert v.mutants >= 3 and v.killed == v.mutants and not v.survivors
    assert v.variants >= 1 and v.variants_passed == v.variants
    assert tasks[1].validation is None  # not asked for


def test_parquet_round_trip_is_exact(tasks: list, tmp_path: Path) -> None:
    path = tmp_path / "tasks.parquet"
    assert dataset.export_tasks(tasks, path) == 3
    table = pq.read_table(path)
    assert table.num_rows == 3
    import pyarrow as pa

    tags_type = table.schema.field("tags").type
    assert pa.types.is_list(tags_type) and pa.types.is_string(tags_type.value_type)
    meta = table.schema.metadata
    assert meta[b"cuda2nki.task_schema"].decode() == dataset.TASK_SCHEMA_VERSION
    again = dataset.import_tasks(path)
    assert again == tasks  # every field, including the JSON-encoded nested ones
    assert again[2].expert_nki is not None and again[1].published_sizes != again[0].published_sizes


def test_hugging_face_datasets_loads_the_parquet(
    tasks: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    path = tmp_path / "tasks.parquet"
    dataset.export_tasks(tasks, path)
    ds = datasets.load_dataset("parquet", data_files=str(path), split="train",
                               cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert ds.num_rows == 3 and ds[0]["kernel"] == tasks[0].kernel
    assert [dataset.task_from_row(r) for r in ds] == tasks
    # the JSONL form too: `load_dataset("json")` infers nested structs, the round trip stays exact
    jsonl = tmp_path / "tasks.jsonl"
    dataset.export_tasks(tasks, jsonl)
    ds = datasets.load_dataset("json", data_files=str(jsonl), split="train",
                               cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert [dataset.task_from_row(r) for r in ds] == tasks


def test_jsonl_of_schema_1_0_still_imports(tasks: list, tmp_path: Path) -> None:
    old = json.loads(tasks[1].model_dump_json())
    old["schema_version"] = "1.0"
    del old["validation"]
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (t,) = dataset.import_tasks(path)
    assert t.validation is None and t.kernel == tasks[1].kernel


def test_unknown_task_file_type_is_refused() -> None:
    with pytest.raises(ValueError, match=r"expected one of \.jsonl, \.parquet"):
        dataset.export_tasks([], "tasks.csv")


def _migrate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrator.cli", *args], capture_output=True,
                          text=True, cwd=tempfile.gettempdir(), timeout=300)  # fmt: skip


def test_migrate_tasks_cli_writes_parquet_and_reports_bad_inputs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* x) { x[0] = ; }\n")
    out = tmp_path / "t.parquet"
    r = _migrate("tasks", str(CORPUS / "vector_add.cu"), str(bad), "--out", str(out),
                 "--validate")  # fmt: skip
    assert r.returncode == 1, r.stderr  # one input failed: not a silent success
    assert "C2N1001" in r.stderr and "bad.cu:1:" in r.stderr
    assert "mutants killed 4/4, variants passed 2/2" in r.stderr
    assert "1 tasks written" in r.stdout
    (t,) = dataset.import_tasks(out)
    assert t.kernel == "vector_add_kernel" and t.validation is not None and t.validation.ok
    r = _migrate("tasks", str(CORPUS / "vector_add.cu"), "--out", str(tmp_path / "t.csv"))
    assert r.returncode == 2 and "expected one of .jsonl, .parquet" in r.stderr
    assert "Traceback" not in r.stderr
