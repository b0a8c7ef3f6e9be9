"""`migrate batch`: migrate many kernels into a resumable JSON-lines results file."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser(
        "batch", help="migrate many kernels; one JSON line per result (resumable)",
        description="Migrate every __global__ kernel of the given .cu files and directories.",
    )  # fmt: skip
    p.add_argument("inputs", nargs="+", help=".cu files or directories of them")
    p.add_argument("--out", required=True, help="results file (JSON lines)")
    p.add_argument(
        "--score",
        metavar="SUBMISSIONS",
        help="score the NKI submissions in this directory instead of migrating "
        "(KERNEL.py or KERNEL_nki.py, KERNEL without _kernel; or CUFILE.py)",
    )
    p.add_argument("--seeds", type=int, default=2, help="seeds per input distribution (--score)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (local backend)")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--address", help="Ray cluster address (default: a local Ray instance)")
    p.add_argument("--resume", action="store_true", help="keep finished results, run the rest")
    p.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto",
                   help="live bar (default on a terminal) or one line per item (default "
                   "otherwise) on stderr")  # fmt: skip
    p.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                   help="numerical check of each migration (default: on)")  # fmt: skip
    p.set_defaults(func=handle)
    return p


def handle(args: argparse.Namespace) -> int:
    from migrator.dataset.batch import run_batch, summary

    if args.jobs < 1:
        sys.stderr.write("migrate: error: --jobs must be at least 1\n")
        return 2
    if args.score is not None and not Path(args.score).is_dir():
        sys.stderr.write(f"migrate: error: --score {args.score}: not a directory of submissions\n")
        return 2
    mode = args.progress
    if mode == "auto":
        mode = "bar" if sys.stderr.isatty() else "lines"
    t0 = time.perf_counter()
    counts: Counter[str] = Counter()
    bar = _Bar() if mode == "bar" else None

    def progress(result: dict[str, Any], done: int, total: int) -> None:
        counts[result.get("status", "failed")] += 1
        if bar is not None:
            bar.update(done, counts)
        elif mode == "lines":
            eta = (time.perf_counter() - t0) / max(1, sum(counts.values())) * (total - done)
            sys.stderr.write(f"[{done}/{total}] {result.get('status', '?'):<8} {result['id']}"
                             f"  (eta {eta:.0f} s)\n")  # fmt: skip

    try:
        if bar is not None:
            bar.start()
        results = run_batch(args.inputs, args.out, jobs=args.jobs, backend=args.backend,
                            resume=args.resume, check=args.check, address=args.address,
                            on_result=progress, submissions=args.score,
                            on_plan=bar.plan if bar is not None else None,
                            seeds=args.seeds)  # fmt: skip
    except RuntimeError as e:  # e.g. the ray backend without Ray installed
        sys.stderr.write(f"migrate: error: {e}\n")
        return 2
    finally:
        if bar is not None:
            bar.stop()
    sys.stdout.write(summary(results) + "\n")
    return 0 if all(r.get("status") != "failed" for r in results) else 1


class _Bar:
    """A rich progress bar with the running complete/partial/failed counts and the ETA."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,  # fmt: skip
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]migrate batch"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"), TimeElapsedColumn(), TextColumn("eta"),
            TimeRemainingColumn(), console=Console(stderr=True),
        )  # fmt: skip
        self.task = self.progress.add_task("batch", total=None, counts="")

    def plan(self, total: int, done: int) -> None:
        """The item count, known once run_batch has planned (no second parse here)."""
        self.progress.update(self.task, total=total, completed=done)

    def start(self) -> None:
        self.progress.start()

    def stop(self) -> None:
        self.progress.stop()

    COLOURS = {"complete": "green", "pass": "green", "partial": "yellow", "fail": "yellow",
               "missing": "yellow", "failed": "red", "error": "red"}  # fmt: skip

    def update(self, done: int, counts: Counter[str]) -> None:
        shown = dict.fromkeys(("complete", "partial", "failed"), 0) if not (
            counts.keys() & {"pass", "fail", "error", "missing"}) else {}  # fmt: skip
        shown.update(counts)
        text = " ".join(f"[{self.COLOURS.get(k, 'white')}]{n} {k}[/]" for k, n in shown.items())
        self.progress.update(self.task, completed=done, counts=text)
