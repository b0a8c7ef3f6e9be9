"""Dataset builders: migration tasks as records, export/import, and batch runs.

from migrator import dataset
tasks = [dataset.build_task("corpus/softmax_row.cu")]
dataset.export_jsonl(tasks, "tasks.jsonl"); again = dataset.import_jsonl("tasks.jsonl")
"""

from migrator.dataset.tasks import (
    TASK_SCHEMA_VERSION,
    TaskRecord,
    build_task,
    export_jsonl,
    import_jsonl,
    iter_sources,
)

__all__ = [
    "TASK_SCHEMA_VERSION",
    "TaskRecord",
    "build_task",
    "export_jsonl",
    "import_jsonl",
    "iter_sources",
]
