"""Time `migrate score` on every corpus kernel with its generated reference as the candidate.

Run: ``.venv/bin/python bench/bench_score.py [--seeds N] [STEM ...]``. One row per kernel: total
seconds and the split (CUDA oracle + float64 truth, sandboxed candidate, reference profile),
trials, verdict and score; "again" is a second candidate of the same task, with the oracle's
results cached by the first. The goals: <= 10 s for a first score, <= 3 s for each further
candidate, on the 2-core machine; the last line reports the worst cases against them.
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
GOAL_AGAIN_S = 3.0  # a further candidate of the same task: the CUDA oracle comes from the cache


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stems", nargs="*")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    stems = args.stems or sorted(p.stem for p in CORPUS.glob("*.toml"))
    print(f"cores: {os.cpu_count()}; seeds: {args.seeds}")
    print(
        f"{'kernel':<22}{'total s':>8}{'oracle':>8}{'sandbox':>8}{'ref':>7}{'again':>8}"
        f"{'trials':>7}  verdict"
    )
    worst = worst_again = 0.0
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
            cache = Path(tmp) / "oracle"  # empty for the first score, warm for the second
            r = score(CORPUS / f"{stem}.cu", km.nki_file, nki_name=name, seeds=args.seeds,
                      oracle_cache=cache)  # fmt: skip
            again = score(CORPUS / f"{stem}.cu", km.nki_file, nki_name=name, seeds=args.seeds,
                          oracle_cache=cache)  # fmt: skip
            t = r.timing
            worst = max(worst, t.total_s)
            worst_again = max(worst_again, again.timing.total_s)
            n = r.numerics.trials if r.numerics else 0
            print(
                f"{stem:<22}{t.total_s:8.2f}{t.oracle_s:8.2f}{t.candidate_s:8.2f}"
                f"{t.reference_s:7.2f}{again.timing.total_s:8.2f}{n:7d}  {r.verdict} {r.score:.1f}"
            )
    ok = worst <= GOAL_S and worst_again <= GOAL_AGAIN_S
    verdict = "ok" if ok else "OVER"
    print(f"worst first score {worst:.2f} s (goal <= {GOAL_S:.0f} s), worst further candidate "
          f"{worst_again:.2f} s (goal <= {GOAL_AGAIN_S:.0f} s): {verdict}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
