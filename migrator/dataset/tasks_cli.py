"""`migrate tasks`: build verified migration tasks from CUDA kernels into JSONL or Parquet."""

from __future__ import annotations

import argparse
import sys
from typing import Any


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
    p.add_argument("--launch", action="append", default=[], metavar="NAME=INT[,NAME=INT]",
                   help="also build this launch-configuration variant: the file's `#define` "
                   "launch constants set to these values (repeatable; inputs without the "
                   "macro skip it; variants that no longer compute the reference are "
                   "rejected)")  # fmt: skip
    p.set_defaults(func=handle)
    return p


def handle(args: argparse.Namespace) -> int:
    from migrator.cuda.source import SourceError
    from migrator.dataset.files import export_tasks, task_file_kind
    from migrator.dataset.tasks import TaskRecord, build_task, iter_sources
    from migrator.dataset.variants import MissingDefine, parse_defines
    from migrator.diagnostics import diagnostics_text

    try:
        task_file_kind(args.out)
    except ValueError as e:
        sys.stderr.write(f"migrate: error: {e}\n")
        return 2
    try:
        launches = [parse_defines(text) for text in args.launch]
    except ValueError as e:
        sys.stderr.write(f"migrate: error: {e}\n")
        return 2
    tasks: list[TaskRecord] = []
    failed = rejected = 0
    sources = list(iter_sources(args.inputs))
    plan: list[dict[str, Any]] = [{}, *({"dtype": d} for d in args.dtype)]
    plan += [{"defines": d} for d in launches]
    for i, cu in enumerate(sources, 1):
        for variant in plan:
            tag = ",".join(f"{k}={v}" for k, v in (variant.get("defines") or {}).items())
            tag = variant.get("dtype") or tag
            label = f"{cu} [{tag}]" if tag else str(cu)
            try:
                t = build_task(cu, validate=args.validate, seeds=args.seeds, **variant)
            except MissingDefine:
                continue  # the launch variant names macros this kernel does not have
            except (SourceError, ValueError, OSError) as e:
                text = diagnostics_text(e) or str(e)
                if variant.get("defines"):  # the kernel is fine; this setting breaks it
                    rejected += 1
                    sys.stderr.write(f"[{i}/{len(sources)}] rejected {label}: {text}\n")
                    continue
                failed += 1
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
    note = f", {rejected} launch variants rejected" if rejected else ""
    sys.stdout.write(f"{n} tasks written to {args.out}; {failed} inputs failed{note}\n")
    weak = [t.kernel for t in tasks if t.validation is not None and not t.validation.ok]
    if weak:
        sys.stdout.write(f"tasks whose tests did not discriminate: {', '.join(weak)}\n")
    return 0 if not failed and not weak else 1
