"""Task records as Parquet: one row per task, readable by pyarrow, pandas and Hugging Face
`datasets.load_dataset("parquet", data_files=...)`.

Flat fields become typed columns. Fields whose shape varies from task to task (the spec, the
size sets, whose keys are each kernel's own size names, the tolerances, provenance, validation)
are stored as JSON text: a struct column would force one union schema on every task and
silently add null keys, and the round trip must be exact. `task_from_row` turns a row back into
a `TaskRecord` from any of these readers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from migrator.dataset.tasks import TASK_SCHEMA_VERSION, TaskRecord

JSON_FIELDS = (
    "spec",
    "published_sizes",
    "hidden_sizes",
    "tolerances",
    "provenance",
    "validation",
)


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise RuntimeError(
            "Parquet task files need pyarrow (pip install pyarrow; it is in the test and dist "
            "extras), or write .jsonl instead"
        ) from e
    return pa, pq


def _schema(pa: Any) -> Any:
    text = opt_text = pa.string()  # Arrow fields are nullable; the names say which may be null
    fields = [
        ("schema_version", text),
        ("id", text),
        ("kernel", text),
        ("family", opt_text),
        ("variant", opt_text),
        ("difficulty", text),
        ("cuda_file", text),
        ("cuda_source", text),
        ("numpy_reference", opt_text),
        ("reference_nki", opt_text),
        ("reference_check_ok", pa.bool_()),
        ("expert_nki", opt_text),
        ("tags", pa.list_(pa.string())),
        *((name, opt_text) for name in JSON_FIELDS),
    ]
    meta = {b"cuda2nki.task_schema": TASK_SCHEMA_VERSION.encode(),
            b"cuda2nki.json_columns": ",".join(JSON_FIELDS).encode()}  # fmt: skip
    return pa.schema(fields, metadata=meta)


def task_to_row(task: TaskRecord) -> dict[str, Any]:
    data = task.model_dump(mode="json")
    for name in JSON_FIELDS:
        value = data.get(name)
        data[name] = None if value is None else json.dumps(value, sort_keys=True)
    return data


def task_from_row(row: Mapping[str, Any]) -> TaskRecord:
    """A `TaskRecord` from a row of a task file as read by pyarrow, pandas or `datasets`
    (Parquet or JSON lines)."""
    data = dict(row)
    for name in JSON_FIELDS:
        value = data.get(name)
        data[name] = json.loads(value) if isinstance(value, str) else value
    if data.get("tags") is not None:
        data["tags"] = list(data["tags"])
    # `load_dataset("json")` unions the keys of struct columns across rows, filling the missing
    # ones with null; these two maps never hold null values, so dropping them is lossless.
    for name in ("tolerances", "provenance"):
        if isinstance(data.get(name), dict):
            data[name] = {k: v for k, v in data[name].items() if v is not None}
    return TaskRecord.model_validate(data)


def export_parquet(tasks: Iterable[TaskRecord], path: str | Path) -> int:
    pa, pq = _pyarrow()
    schema = _schema(pa)
    missing = set(TaskRecord.model_fields) - set(schema.names)
    if missing:  # a new record field without a column would be dropped silently
        raise AssertionError(f"Parquet schema lacks columns for {sorted(missing)}")
    rows = [task_to_row(t) for t in tasks]
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, str(path), compression="zstd")
    return len(rows)


def import_parquet(path: str | Path) -> list[TaskRecord]:
    _, pq = _pyarrow()
    return [task_from_row(r) for r in pq.read_table(str(path)).to_pylist()]
