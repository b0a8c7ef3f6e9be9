"""Front-end speed: preprocess + parse + IR for the whole corpus.

Baseline in the same run: tree-sitter parsing alone of the same (already preprocessed) text, so
the ratio shows what preprocessing and analysis add on top of the parser.

    python bench/bench_frontend.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from migrator.cuda.frontend import analyze
from migrator.cuda.parse import new_parser, parse_file

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    files = sorted(CORPUS.glob("*.cu"))
    texts = [parse_file(f).source_bytes for f in files]  # warm-up and baseline input
    full, parse_only = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        kernels = sum(len(analyze(parse_file(f)).kernels) for f in files)
        full.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        parser = new_parser()
        for t in texts:
            parser.parse(t)
        parse_only.append(time.perf_counter() - t0)
    best, base = min(full), min(parse_only)
    print(f"corpus: {len(files)} files, {kernels} functions")
    print(
        f"front end (pcpp + tree-sitter + IR): best {best * 1e3:.1f} ms, "
        f"median {statistics.median(full) * 1e3:.1f} ms"
    )
    print(f"tree-sitter parse only (baseline):   best {base * 1e3:.2f} ms")
    print(
        f"ratio front end / parse only: {best / base:.0f}x; "
        f"per file {best / len(files) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
