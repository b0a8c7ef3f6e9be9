"""Batch throughput: tasks per minute for `migrate batch` over the corpus.

Local process pool with 1 and 2 workers (and Ray with a local instance when Ray is installed),
each timed on the same corpus in the same run. Every task is a full migration with its
numerical check.

    python bench/bench_batch.py [--no-check]
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

from migrator.dataset.batch import run_batch

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    configs: list[tuple[str, str, int]] = [("local", "local", 1), ("local", "local", 2)]
    if importlib.util.find_spec("ray") is not None:
        configs.append(("ray (local)", "ray", 2))
    else:
        print("ray: not installed (pip install '.[dist]'); skipped")
    with tempfile.TemporaryDirectory() as tmp:
        for label, backend, jobs in configs:
            out = Path(tmp) / f"{backend}{jobs}.jsonl"
            t0 = time.perf_counter()
            results = run_batch([CORPUS], out, jobs=jobs, backend=backend,  # type: ignore[arg-type]
                                check=not args.no_check)  # fmt: skip
            dt = time.perf_counter() - t0
            ok = sum(r["status"] != "failed" for r in results)
            print(f"{label:<12} workers={jobs}: {len(results)} tasks ({ok} not failed) in "
                  f"{dt:.1f} s = {len(results) / dt * 60:.0f} tasks/min")  # fmt: skip


if __name__ == "__main__":
    main()
