"""Task files by suffix: `.jsonl` (always available) or `.parquet` (needs pyarrow)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from migrator.dataset.tasks import TaskRecord, export_jsonl, import_jsonl

SUFFIXES = (".jsonl", ".parquet")


def task_file_kind(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{path}: unknown task file type {suffix or '(none)'!r}; "
                         f"expected one of {', '.join(SUFFIXES)}")  # fmt: skip
    return suffix


def export_tasks(tasks: Iterable[TaskRecord], path: str | Path) -> int:
    if task_file_kind(path) == ".parquet":
        from migrator.dataset.parquet import export_parquet

        return export_parquet(tasks, path)
    return export_jsonl(tasks, path)


def import_tasks(path: str | Path) -> list[TaskRecord]:
    if task_file_kind(path) == ".parquet":
        from migrator.dataset.parquet import import_parquet

        return import_parquet(path)
    return import_jsonl(path)
