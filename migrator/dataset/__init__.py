"""Dataset builders: migration tasks as records, export/import, and batch runs.

from migrator import dataset
tasks = [dataset.build_task("corpus/softmax_row.cu")]
dataset.export_jsonl(tasks, "tasks.jsonl"); again = dataset.import_jsonl("tasks.jsonl")
dataset.export_tasks(tasks, "tasks.parquet")   # Parquet (pyarrow); datasets.load_dataset reads it

"""

from migrator.dataset.files import export_tasks, import_tasks
from migrator.dataset.parquet import export_parquet, import_parquet, task_from_row
from migrator.dataset.tasks import (
    TASK_SCHEMA_VERSION,
    TaskRecord,
    TaskValidation,
    build_task,
    export_jsonl,
    import_jsonl,
    iter_sources,
)
from migrator.dataset.variants import launch_variant, rewrite_defines

__all__ = [
    "TASK_SCHEMA_VERSION",
    "TaskRecord",
    "TaskValidation",
    "export_parquet",
    "export_tasks",
    "import_parquet",
    "import_tasks",
    "task_from_row",
    "build_task",
    "export_jsonl",
    "import_jsonl",
    "iter_sources",
    "launch_variant",
    "rewrite_defines",
]
