"""`migrate batch`: migrate many kernels into a resumable JSON-lines results file."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser(
        "batch", help="migrate many kernels; one JSON line per result (resumable)",
        description="Migrate every __global__ kernel of the given .cu files and directories.",
    )  # fmt: skip
    p.add_argument("inputs", nargs="+", help=".cu files or directories of them")
    p.add_argument("--out", required=True, help="results file (JSON lines)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (local backend)")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--address", help="Ray cluster address (default: a local Ray instance)")
    p.add_argument("--resume", action="store_true", help="keep finished results, run the rest")
    p.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                   help="numerical check of each migration (default: on)")  # fmt: skip
    p.set_defaults(func=handle)
    return p


def handle(args: argparse.Namespace) -> int:
    from migrator.dataset.batch import run_batch, summary

    t0 = time.perf_counter()

    def progress(result: dict[str, Any], done: int, total: int) -> None:
        eta = (time.perf_counter() - t0) / max(1, done) * (total - done)
        sys.stderr.write(f"[{done}/{total}] {result.get('status', '?'):<8} {result['id']}"
                         f"  (eta {eta:.0f} s)\n")  # fmt: skip

    if args.jobs < 1:
        sys.stderr.write("migrate: error: --jobs must be at least 1\n")
        return 2
    try:
        results = run_batch(args.inputs, args.out, jobs=args.jobs, backend=args.backend,
                            resume=args.resume, check=args.check, address=args.address,
                            on_result=progress)  # fmt: skip
    except RuntimeError as e:  # e.g. the ray backend without Ray installed
        sys.stderr.write(f"migrate: error: {e}\n")
        return 2
    sys.stdout.write(summary(results) + "\n")
    return 0 if all(r.get("status") != "failed" for r in results) else 1
