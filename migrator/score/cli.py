"""``migrate score kernel.cu candidate.py``: the scorer's subcommand.

``register(subparsers)`` adds it to the main CLI; the handler returns the exit status:
0 verdict pass, 1 verdict fail, 2 bad input (or the scorer could not grade).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from migrator.score.report import RENDERERS


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "score",
        help="score an NKI migration against its CUDA original",
        description="Run the candidate NKI kernel in a sandbox on many inputs and shapes, compare "
        "it with the CUDA original (numerics policy), check fidelity, anti-gaming rules and "
        "Trainium performance, and print a rubric report.",
    )
    p.add_argument("cuda", help="the CUDA source (.cu) with its spec sidecar")
    p.add_argument("candidate", nargs="+", help="the NKI kernel file(s) to score")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="candidates scored at once (several candidates of one task: the first runs alone "
        "and fills the oracle cache, the others reuse it)",
    )
    p.add_argument("--kernel", help="the __global__ kernel (must match the spec)")
    p.add_argument("--spec", help="spec sidecar (default: <cuda stem>.toml)")
    p.add_argument("--nki-name", help="kernel name in the candidate (default: from the spec)")
    p.add_argument("--format", choices=sorted(RENDERERS), default="text")
    p.add_argument("-o", "--output", help="write the report here instead of stdout")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=5, help="seeds per input distribution")
    p.add_argument("--no-reference", action="store_true", help="skip the generated reference")
    p.add_argument(
        "--oracle-cache",
        metavar="DIR",
        help="where the CUDA oracle's results are kept per task and trial, so further "
        "candidates of a task skip the CUDA run (default: ~/.cache/cuda2nki/oracle)",
    )
    p.add_argument("--no-oracle-cache", action="store_true", help="always run the CUDA oracle")
    p.set_defaults(func=run, handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    from migrator.score import ScoreInputError, score
    from migrator.score.oracle_cache import default_dir

    cache = None if args.no_oracle_cache else (args.oracle_cache or default_dir())
    candidates: list[str] = list(args.candidate)
    if args.output and len(candidates) > 1:
        print("migrate score: -o takes one candidate (reports of several go to stdout)",
              file=sys.stderr)  # fmt: skip
        return 2

    def one(candidate: str) -> tuple[str, int]:
        try:
            report = score(
                args.cuda,
                candidate,
                kernel=args.kernel,
                spec=args.spec,
                seed=args.seed,
                seeds=max(1, args.seeds),
                reference=None if args.no_reference else "generated",
                nki_name=args.nki_name,
                oracle_cache=cache,
            )
        except ScoreInputError as e:
            return f"migrate score: {candidate}: {e}\n", 2
        return RENDERERS[args.format](report), {"pass": 0, "fail": 1}.get(report.verdict, 2)

    # the first alone (it fills the oracle cache), then the others, `--jobs` at a time; each
    # candidate runs in its own sandboxed process, so threads suffice to overlap them
    results = [one(candidates[0])]
    if len(candidates) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results += list(pool.map(one, candidates[1:]))
    for text, code in results:
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        elif code == 2 and text.startswith("migrate score:"):
            sys.stderr.write(text)
        else:
            sys.stdout.write(text)
    return max(code for _, code in results)  # any error 2, else any fail 1, else 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m migrator.score.cli``) until the main CLI wires it in."""
    parser = argparse.ArgumentParser(prog="migrate")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
