"""``migrate profile``: run a kernel file in the emulator and print its cost profile.

``register(subparsers)`` adds the subcommand; the CLI owner wires it into ``migrator/cli.py``.
Exit codes: 0 ok, 1 constraint violation in the kernel, 2 bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .cost import Profile, profile
from .errors import NkiConstraintError
from .options import EmulatorOptions
from .shim import kernel_from_module, load_kernel_module


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``profile`` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "profile", help="run an NKI kernel in the emulator and report its estimated cost"
    )
    parser.add_argument("kernel_file", type=Path, help="Python file defining the NKI kernel")
    parser.add_argument("--kernel", required=True, help="kernel function name in the file")
    parser.add_argument("--inputs", nargs="*", type=Path, default=[], help=".npy input arrays")
    parser.add_argument("--grid", type=int, nargs="*", default=[], help="SPMD launch grid")
    parser.add_argument("--target", choices=["trn1", "trn2"], default="trn2")
    parser.add_argument("--json", action="store_true", help="print the profile as JSON")
    parser.set_defaults(func=handle)
    return parser


def render(p: Profile) -> str:
    """Human-readable summary of a profile."""
    lines = [
        f"target {p.target}: {p.instructions} instructions, estimated "
        f"{p.estimated_latency_us:.2f} us (perfect overlap {p.overlap_bound_us:.2f} us, "
        f"serial {p.serial_latency_us:.2f} us), "
        f"roofline {p.roofline_latency_us:.2f} us ({p.roofline_fraction:.0%}), "
        f"bottleneck {p.bottleneck}",
    ]
    for name, stats in p.engines.items():
        if stats.instructions:
            lines.append(f"  {name:<7} {stats.instructions:6d} instr  {stats.busy_us:10.2f} us")
    lines.append(
        f"  DMA {p.dma_bytes} B in {p.dma_descriptors} descriptors "
        f"({p.mean_descriptor_bytes:.0f} B each); peak SBUF "
        f"{p.peak_sbuf_bytes_per_partition} B/partition, PSUM {p.peak_psum_banks} banks"
    )
    lines += [f"  hot: {h.location} {h.engine} {h.busy_us:.2f} us" for h in p.hotspots]
    lines += [f"  finding: {f}" for f in p.findings]
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    """Run the subcommand; return the process exit code."""
    try:
        arrays = [np.load(path) for path in args.inputs]
        module = load_kernel_module(args.kernel_file)
        kernel = kernel_from_module(module, args.kernel)
    except (OSError, ImportError, LookupError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    options = EmulatorOptions(target=args.target)
    try:
        result = profile(kernel, *arrays, grid=tuple(args.grid), options=options)
    except NkiConstraintError as exc:
        print(f"constraint violation: {exc}")
        return 1
    print(result.model_dump_json(indent=2) if args.json else render(result))
    return 0
