"""`migrate KERNEL.cu` time when the kernel goes the lifted route, against the pattern route.

For each corpus kernel that completes from its lifted tensor program (no matcher claims it, or the
matcher's plan fails), `migrate` runs with its numerical check, in-process, `--rounds` times;
the baseline in the same run is `migrate` of a kernel the matchers handle (softmax_row), timed
in turn with it. Also reported: the lifting step alone (`lift_task`: two traced runs at small
sizes, the fit, verification at other sizes). Goal: at most 2 s per kernel with the check.

    python bench/bench_lift.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from migrator.api import clear_caches
from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.migration import migrate

ROOT = Path(__file__).resolve().parents[1]
LIFTED = ["mean_rows_cg", "sigmoid_vec4", "softmax_warp", "l2_norm_sq", "swiglu", "col_sum"]
BASELINE = "softmax_row"


def _migrate_s(stem: str) -> tuple[float, str]:
    clear_caches()  # every round is a first migration (as in a fresh process), imports aside
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        (k,) = migrate(ROOT / "corpus" / f"{stem}.cu", out_dir=tmp).kernels
        return time.perf_counter() - t, f"{k.status} ({k.family}/{k.variant})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    _migrate_s(BASELINE)  # warm imports and caches once
    print(f"{'kernel':16} {'migrate+check':>14} {'baseline':>10} {'ratio':>6} {'lift':>7}  status")
    for stem in LIFTED:
        mine, base, lift = [], [], []
        status = ""
        for _ in range(args.rounds):
            s, status = _migrate_s(stem)
            mine.append(s)
            base.append(_migrate_s(BASELINE)[0])
            spec = load_spec(ROOT / "corpus" / f"{stem}.toml")
            clear_caches()
            t = time.perf_counter()
            lift_task(spec)
            lift.append(time.perf_counter() - t)
        m, b = statistics.median(mine), statistics.median(base)
        print(f"{stem:16} {m:13.2f}s {b:9.2f}s {m / b:6.2f} {statistics.median(lift):6.2f}s  "
              f"{status}")  # fmt: skip


if __name__ == "__main__":
    main()
