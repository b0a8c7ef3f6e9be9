"""``migrate profile``: run an NKI kernel file in the emulator, in the scorer's sandbox, and
print its cost profile.

The file is user code: it runs in a separate, limited process (`migrator.score.sandbox`: no
network, no writes outside its folder, CPU/memory/time limits), as every candidate the scorer
runs does. Exit codes: 0 ok; 1 the kernel's own failure (it raised, broke a Trainium
constraint, did something the sandbox refuses, or ran past the time limit), with the
kernel's line; 2 bad usage (a kernel name the file lacks) or unreadable input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from migrator.nki.cost import Profile, render_profile
from migrator.score.sandbox import Limits, TrialJob, run_candidate


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """Add the ``profile`` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "profile", help="run an NKI kernel in the emulator and report its estimated cost"
    )
    parser.add_argument("kernel_file", type=Path, help="Python file defining the NKI kernel")
    parser.add_argument("--kernel", help="kernel function name (default: the file's only one)")
    parser.add_argument("--inputs", nargs="*", type=Path, default=[], help=".npy input arrays")
    parser.add_argument("--grid", type=int, nargs="*", default=[], help="SPMD launch grid")
    parser.add_argument("--target", choices=["trn1", "trn2"], default="trn2")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds the kernel may run (default 120)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the profile as JSON")
    parser.set_defaults(func=handle)
    return parser


def handle(args: argparse.Namespace) -> int:
    """Run the subcommand; return the process exit code."""
    if not args.kernel_file.is_file():
        print(f"error: {args.kernel_file}: file not found")
        return 2
    try:
        arrays = [np.load(path) for path in args.inputs]
    except (OSError, ValueError) as exc:
        print(f"error: cannot read an input: {exc}")
        return 2
    seconds = max(1, int(args.timeout))
    limits = Limits(cpu_seconds=seconds, wall_seconds=float(seconds) + 5)
    job = TrialJob(0, arrays, {}, profile=True, grid=tuple(args.grid))
    res = run_candidate(args.kernel_file, args.kernel, [job], limits=limits, target=args.target)
    if res.status != "ok":
        print(f"error: the kernel did not finish ({res.status}): {res.detail}")
        return 1
    if res.load_error:
        print(f"error: loading {args.kernel_file}: {res.load_error}")
        return 2 if res.missing_kernel else 1  # a kernel name the file lacks: bad usage
    trial = res.trials[0] if res.trials else {}
    status = trial.get("status")
    if status == "constraint":
        print(f"constraint violation: {trial.get('error')}")
        return 1
    if status != "ok" or "profile" not in trial:
        print(f"error: the kernel failed ({status}): {trial.get('error', 'no result')}")
        return 1
    result = Profile.model_validate(trial["profile"])
    print(result.model_dump_json(indent=2) if args.json else render_profile(result))
    return 0
