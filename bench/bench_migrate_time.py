"""First-migration time of real kernels, one process per kernel, two installations in turn.

Issue 14 asks `migrate kernel.cu` with its check to take at most 2 s per kernel on 2 cores. This
times `python -m migrator.cli FILE --kernel K` (imports included, nothing cached between
kernels) for every kernel a `tools/realworld.py --json` run found complete, with two Python
interpreters whose environments hold two versions of cuda2nki (a baseline checkout and the
candidate, each `pip install`ed into its own virtual environment), alternating which goes first
from kernel to kernel, so that both see the same machine. Reports the median, the 75th and 90th
percentiles, how many kernels take at most 2 s, and any kernel whose status line differs.

    python bench/bench_migrate_time.py ROWS.jsonl[,MORE.jsonl] --base /venv-a/bin/python \\
        --new /venv-b/bin/python --root DIR_THE_JSONL_PATHS_ARE_RELATIVE_TO [--out times.jsonl]

Files under a `cuda-samples` directory get `-I <that checkout>/Common`, as the suite runs them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def _kernels(paths: list[str]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for p in paths:
        for line in Path(p).read_text().splitlines():
            row = json.loads(line)
            key = (row["file"], row["kernel"])
            if row.get("status") == "complete" and key not in seen:
                seen.append(key)
    return seen


def _includes(file: str) -> list[str]:
    parts = Path(file).parts
    if "cuda-samples" in parts:
        root = Path(*parts[: parts.index("cuda-samples") + 1])
        return ["-I", str(root / "Common")]
    return []


def _once(python: str, file: str, kernel: str, root: Path) -> tuple[float, str]:
    out = Path(tempfile.mkdtemp(prefix="bench_migrate_time_"))
    try:
        cmd = [python, "-m", "migrator.cli", file, "--kernel", kernel, "-o", str(out)]
        t = time.perf_counter()
        p = subprocess.run([*cmd, *_includes(file)], capture_output=True, text=True, cwd=root)
        took = time.perf_counter() - t
    finally:
        shutil.rmtree(out, ignore_errors=True)
    status = next((ln for ln in p.stdout.splitlines() if ln.startswith(f"{kernel}:")), "")
    return took, status.split(" -> ")[0].split(", est.")[0]


def _summary(name: str, times: list[float]) -> str:
    s = sorted(times)
    # (20-quantiles, the inclusive method: [14] is the 75th percentile, [17] the 90th)
    q = statistics.quantiles(s, n=20, method="inclusive") if len(s) > 1 else s * 19
    within = sum(t <= 2.0 for t in s)
    return (f"{name}: median {statistics.median(s):.2f} s, {within} of {len(s)} within 2 s, "
            f"75th {q[14]:.2f} s, 90th {q[17]:.2f} s, total {sum(s):.0f} s, "
            f"over 5 s {sum(t > 5 for t in s)}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", help="tools/realworld.py --json output(s), comma-separated")
    ap.add_argument("--base", required=True, help="the baseline installation's python")
    ap.add_argument("--new", required=True, help="the candidate installation's python")
    ap.add_argument("--root", default=".", help="where the rows' file paths start")
    ap.add_argument("--out", help="write one JSON line per kernel here")
    args = ap.parse_args()
    kernels = _kernels(args.rows.split(","))
    base: list[float] = []
    new: list[float] = []
    changed: list[str] = []
    out = open(args.out, "w") if args.out else None  # noqa: SIM115 (written as it goes)
    for n, (file, kernel) in enumerate(kernels):
        order = [("base", args.base), ("new", args.new)]
        got = dict((tag, _once(py, file, kernel, Path(args.root)))
                   for tag, py in (order if n % 2 == 0 else order[::-1]))  # fmt: skip
        base.append(got["base"][0])
        new.append(got["new"][0])
        if got["base"][1].split(",")[0] != got["new"][1].split(",")[0]:
            changed.append(f"{file} {kernel}: {got['base'][1]} | {got['new'][1]}")
        if out is not None:
            out.write(json.dumps({"file": file, "kernel": kernel, "base": got["base"][0],
                                  "new": got["new"][0], "base_status": got["base"][1],
                                  "new_status": got["new"][1]}) + "\n")  # fmt: skip
            out.flush()
    if out is not None:
        out.close()
    print(_summary("baseline", base))
    print(_summary("candidate", new))
    print(f"status changed: {len(changed)}")
    for c in changed:
        print("  " + c)


if __name__ == "__main__":
    main()
