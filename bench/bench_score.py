"""Time `migrate score` on every corpus kernel with its generated reference as the candidate.

Run: ``.venv/bin/python bench/bench_score.py [--seeds N] [STEM ...]``. One row per kernel: total
seconds and the split (CUDA oracle + float64 truth, sandboxed candidate, reference profile),
trials, verdict and score. The goal (issue 6) is <= 10 s per corpus-sized kernel on the 2-core
machine; the last line reports the worst case against it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from migrator.contract import load_spec
from migrator.migration import migrate
from migrator.score import score

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
GOAL_S = 10.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stems", nargs="*")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    stems = args.stems or sorted(p.stem for p in CORPUS.glob("*.toml"))
    print(f"cores: {os.cpu_count()}; seeds: {args.seeds}")
    print(
        f"{'kernel':<22}{'total s':>8}{'oracle':>8}{'sandbox':>8}{'ref':>7}{'trials':>7}  verdict"
    )
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for stem in stems:
            spec = load_spec(CORPUS / f"{stem}.toml")
            km = migrate(
                CORPUS / f"{stem}.cu", kernel=spec.kernel.name, out_dir=tmp, check=False
            ).kernels[0]
            if km.status != "complete" or not km.nki_file:
                print(f"{stem:<22}  (no complete reference migration: {km.status})")
                continue
            name = spec.kernel.name.removesuffix("_kernel")
            r = score(CORPUS / f"{stem}.cu", km.nki_file, nki_name=name, seeds=args.seeds)
            t = r.timing
            worst = max(worst, t.total_s)
            n = r.numerics.trials if r.numerics else 0
            print(
                f"{stem:<22}{t.total_s:8.2f}{t.oracle_s:8.2f}{t.candidate_s:8.2f}"
                f"{t.reference_s:7.2f}{n:7d}  {r.verdict} {r.score:.1f}"
            )
    print(f"worst {worst:.2f} s (goal <= {GOAL_S:.0f} s): {'ok' if worst <= GOAL_S else 'OVER'}")
    return 0 if worst <= GOAL_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
