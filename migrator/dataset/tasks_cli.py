"""`migrate tasks`: build verified migration tasks from CUDA kernels into JSONL or Parquet."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser(
        "tasks", help="build migration task records (JSONL or Parquet)",
        description="One task record per kernel: CUDA source, spec, published and hidden sizes, "
        "the generated and checked reference NKI, the expert NKI where the corpus has one, "
        "tolerances, tags, provenance. With --validate, each task's tests are shown to fail "
        "wrong migrations (mutants of the reference) and to pass correct variants.",
    )  # fmt: skip
    p.add_argument("inputs", nargs="+", help=".cu files or directories of them")
    p.add_argument("--out", required=True, help="tasks file: .jsonl or .parquet")
    p.add_argument("--validate", action="store_true", help="score mutants of each reference")
    p.add_argument("--seeds", type=int, default=1, help="seeds per distribution (--validate)")
    p.add_argument("--dtype", action="append", default=[], choices=["bfloat16", "float16"],
                   help="also build this dtype variant of each task (repeatable)")  # fmt: skip
    p.set_defaults(func=handle)
    return p


def handle(args: argparse.Namespace) -> int:
    from migrator.cuda.source import SourceError
    from migrator.dataset.files import export_tasks, task_file_kind
    from migrator.dataset.tasks import TaskRecord, build_task, iter_sources
    from migrator.diagnostics import diagnostics_text

    try:
        task_file_kind(args.out)
    except ValueError as e:
        sys.stderr.write(f"migrate: error: {e}\n")
        return 2
    tasks: list[TaskRecord] = []
    failed = 0
    sources = list(iter_sources(args.inputs))
    for i, cu in enumerate(sources, 1):
        for dtype in [None, *args.dtype]:
            label = f"{cu} [{dtype}]" if dtype else str(cu)
            try:
                t = build_task(cu, validate=args.validate, seeds=args.seeds, dtype=dtype)
            except (SourceError, ValueError, OSError) as e:
                failed += 1
                text = diagnostics_text(e) or str(e)
                sys.stderr.write(f"[{i}/{len(sources)}] failed   {label}: {text}\n")
                break  # the variants of an input that fails fail too
            tasks.append(t)
            v = t.validation
            extra = (f"  mutants killed {v.killed}/{v.mutants}, variants passed "
                     f"{v.variants_passed}/{v.variants}" if v else "")  # fmt: skip
            sys.stderr.write(f"[{i}/{len(sources)}] {t.difficulty:<11} {label}{extra}\n")
    try:
        n = export_tasks(tasks, args.out)
    except RuntimeError as e:  # .parquet without pyarrow
        sys.stderr.write(f"migrate: error: {e}\n")
        return 2
    sys.stdout.write(f"{n} tasks written to {args.out}; {failed} inputs failed\n")
    weak = [t.kernel for t in tasks if t.validation is not None and not t.validation.ok]
    if weak:
        sys.stdout.write(f"tasks whose tests did not discriminate: {', '.join(weak)}\n")
    return 0 if not failed and not weak else 1
