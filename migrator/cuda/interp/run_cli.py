"""`migrate run`: execute a CUDA kernel on the CPU and save its outputs as .npy files.

With a spec (``--spec`` or the ``.toml`` next to the ``.cu``) inputs, scalars and the launch come
from the task contract; ``--sizes`` overrides named sizes. Without one, ``--kernel``, ``--grid``,
``--block`` and ``--inputs`` give everything, and ``--sizes`` sets scalar parameters. Exit codes:
0 clean run, 1 the kernel misbehaved (sanitizer error or findings), 2 a usage error. User errors
print one clear message, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from migrator.contract import SpecError, bind_source, load_spec, spec_for_source
from migrator.cuda.interp.findings import InterpError, LaunchError, UnsupportedError
from migrator.cuda.interp.options import InterpOptions
from migrator.cuda.interp.runner import RunResult, kernel_signature, run_kernel
from migrator.cuda.interp.spec_run import as_dtype, run_spec_full
from migrator.cuda.parse import parse_file, render_with_caret
from migrator.cuda.source import SourceError


class UsageError(Exception):
    """A problem with the command line or its files (exit status 2)."""


def register(subparsers: Any, infer: Any = None) -> argparse.ArgumentParser:
    """Add the `run` subcommand to a `migrate` argparse subparsers object. `infer(source,
    kernel) -> TaskSpec` infers a spec when there is no sidecar and no --grid/--block (the
    same inference as `migrate KERNEL.cu`; handed in because it is a later stage)."""
    p = subparsers.add_parser(
        "run", help="run a CUDA kernel on the CPU (the oracle)", description=__doc__.splitlines()[0]
    )
    p.add_argument("source", help="CUDA file (.cu)")
    p.add_argument("--kernel", help="__global__ function (default: the spec's, or the only one)")
    p.add_argument("--spec", help="spec sidecar (default: the .toml next to the .cu)")
    p.add_argument("--sizes", default="", help="N=1000,M=64: spec sizes (or scalar params)")
    p.add_argument("--grid", help="X[,Y[,Z]] blocks (overrides the spec)")
    p.add_argument("--block", help="X[,Y[,Z]] threads (overrides the spec)")
    p.add_argument(
        "--inputs",
        nargs="*",
        default=[],
        metavar="NAME=FILE.npy",
        help="input arrays from .npy files",
    )
    p.add_argument("-o", "--out", default=".", help="directory for output .npy files")
    p.add_argument(
        "--fmad",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="contract float a*b+c into one rounding (nvcc default: on)",
    )
    p.add_argument("--shadow", action="store_true", help="evaluate float in float64")
    p.add_argument("--seed", type=int, default=0, help="seed for spec-generated inputs")
    p.set_defaults(func=handle, handler=handle, infer=infer)  # cli.py dispatches on `func`
    return p


def handle(args: argparse.Namespace) -> int:
    """Run the command; returns the exit status."""
    try:
        return _run(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SourceError as e:
        for d in e.diagnostics:
            print(render_with_caret(d), file=sys.stderr)
        return 2
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (UnsupportedError, LaunchError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except InterpError as e:
        if getattr(args, "debug", False) and e.__cause__ is not None:
            raise  # --debug: show the internal traceback
        print(f"kernel error: {e}", file=sys.stderr)
        return 1


def _dims(text: str | None, what: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        vals = tuple(int(x) for x in text.split(","))
    except ValueError as e:
        raise UsageError(f"--{what} {text!r}: expected X[,Y[,Z]] integers") from e
    if not 1 <= len(vals) <= 3 or min(vals) < 1:
        raise UsageError(f"--{what} {text!r}: expected 1 to 3 positive integers")
    return vals


def _pairs(text: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in [t for t in text.split(",") if t.strip()]:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--{what}: {item!r} is not NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def _number(name: str, value: str) -> int | float:
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError as e:
            raise UsageError(f"{name}={value!r} is not a number") from e


def _load_inputs(items: list[str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep:
            raise UsageError(f"--inputs {item!r}: expected NAME=FILE.npy")
        try:
            out[name] = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"--inputs {name}: cannot read {file}: {e}") from e
    return out


def _run(args: argparse.Namespace) -> int:
    src = Path(args.source)
    if not src.is_file():
        raise UsageError(f"{src}: file not found")
    options = InterpOptions(fmad=args.fmad, shadow_f64=args.shadow, oob="report")
    grid, block = _dims(args.grid, "grid"), _dims(args.block, "block")
    inputs = _load_inputs(args.inputs)
    spec_path = Path(args.spec) if args.spec else spec_for_source(src)
    out_dir = Path(args.out)
    saved: dict[str, np.ndarray] = {}
    spec = bind_source(load_spec(spec_path), src) if spec_path is not None else None
    infer = getattr(args, "infer", None)
    if spec is None and grid is None and block is None and infer is not None:
        try:  # no sidecar and no launch given: the spec `migrate KERNEL.cu` would infer
            spec = infer(src, args.kernel)
        except ValueError as e:
            raise UsageError(
                f"no spec next to the source and none could be inferred ({e}); pass --spec, "
                "or --grid and --block"
            ) from e
        spec_path = Path(spec.path) if spec.path else src.with_suffix(".inferred.toml")
    if spec is not None:
        if args.kernel and args.kernel != spec.kernel.name:
            raise UsageError(f"--kernel {args.kernel} differs from the spec's {spec.kernel.name}")
        sizes = {k: int(_number(k, v)) for k, v in _pairs(args.sizes, "sizes").items()}
        try:
            run = run_spec_full(spec, sizes, args.seed, inputs, options, grid, block, src)
        except ValueError as e:
            raise UsageError(str(e)) from e
        result = run.result
        for t, arr in zip(spec.outputs_in_order, run.outputs, strict=True):
            saved[t.name] = arr
        label = f"{spec.kernel.name} (spec {spec_path}, sizes {run.sizes})"
    else:
        if grid is None or block is None:
            raise UsageError("no spec next to the source: pass --spec, or --grid and --block")
        kargs: dict[str, Any] = dict(inputs)
        for k, v in _pairs(args.sizes, "sizes").items():
            kargs[k] = _number(k, v)
        parsed = parse_file(src)
        signature = kernel_signature(parsed, args.kernel)
        for name, t in signature:  # raw bf16 .npy -> bf16
            a = kargs.get(name)
            if isinstance(a, np.ndarray) and t.elem is not None and t.elem.dtype is not None:
                try:
                    kargs[name] = as_dtype(a, t.elem.dtype) if a.dtype.kind == "V" else a
                except ValueError as e:
                    raise UsageError(f"--inputs {name}: {e}") from e
        made = _output_buffers(src, args.kernel, signature, kargs)
        if made:  # measured: each saved output is as long as the kernel reached
            options = InterpOptions(fmad=args.fmad, shadow_f64=args.shadow, oob="report",
                                    extents=True)  # fmt: skip
        result = run_kernel(parsed, args.kernel, grid, block, kargs, options=options)
        saved = {k: v for k, v in result.outputs.items()}
        for name in made:
            saved[name] = saved[name][: result.extents.get(name, 0)]
        label = args.kernel or "kernel"
    _save(out_dir, saved)
    _summary(label, result, saved, out_dir)
    return 1 if result.findings else 0


OUTPUT_ELEMS = 1 << 22  # a buffer for an output not passed with --grid/--block


def _output_buffers(
    src: Path, kernel: str | None, signature: list[tuple[str, Any]], kargs: dict[str, Any]
) -> list[str]:
    """Zeroed buffers for the array parameters not passed that the kernel only writes (their
    length is measured by the run); a missing array the kernel reads is a usage error."""
    from migrator.cuda.frontend import analyze_file

    missing = [(n, t) for n, t in signature if t.kind in ("ptr", "array") and n not in kargs]
    if not missing:
        return []
    tu = analyze_file(src)
    k = tu.kernel(kernel) if kernel else tu.global_kernels[0]
    roles = {p.name: p.role for p in k.params}
    read = [n for n, _ in missing if roles.get(n) in ("in", "inout")]
    if read:
        raise UsageError(
            f"{k.name} reads {', '.join(read)}: pass {read[0]}=FILE.npy in --inputs (outputs "
            "it only writes may be left out: they are allocated and saved at the length the "
            "kernel reaches)"
        )
    for name, t in missing:
        elem = t.elem.scalar if t.elem is not None else None
        dtype = elem.dtype if elem is not None and elem.dtype is not None else np.float32
        kargs[name] = np.zeros(OUTPUT_ELEMS, dtype=dtype)
    return [n for n, _ in missing]


def _save(out_dir: Path, arrays: dict[str, np.ndarray]) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, arr in arrays.items():
            np.save(out_dir / f"{name}.npy", saved_form(arr))
    except OSError as e:
        raise UsageError(f"cannot write outputs to {out_dir}: {e}") from e


def saved_form(arr: np.ndarray) -> np.ndarray:
    """What a `.npy` output holds: bf16/fp8 widened to float32 (exact), since numpy's format
    has no name for them and would store raw `|V2` bytes; other dtypes as they are."""
    if arr.dtype.kind == "V" or (arr.dtype.kind == "f" and arr.dtype not in _NUMPY_FLOATS):
        return arr.astype(np.float32)
    return arr


_NUMPY_FLOATS = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)}


def _summary(label: str, r: RunResult, saved: dict[str, np.ndarray], out_dir: Path) -> None:
    print(f"ran {label}")
    print(
        f"  {r.thread_statements:,} thread-statements in {r.seconds:.3f}s "
        f"({r.statements_per_second / 1e6:.1f} M/s, {r.batches} batch(es))"
    )
    for name, arr in saved.items():
        widened = " (saved as float32: exact)" if saved_form(arr) is not arr else ""
        print(f"  {name}: {arr.dtype}{list(arr.shape)} -> {out_dir / (name + '.npy')}{widened}")
    for f in r.findings:
        print(f"  {f.render()}")
    if not r.findings:
        print("  no findings")
