"""Run the pipeline over real third-party CUDA files as they stand: the development suite.

Usage::

    .venv/bin/python tools/realworld.py DIR_OR_FILE... [--jobs N] [--timeout S] [--json OUT]
        [--no-migrate] [--only SUBSTRING] [-I DIR ...]

For every `__global__` kernel of every `.cu` file found: `inspect` (the front end), spec
inference from the file's host code, the CUDA interpreter, and `migrate` with its check. The
interpreter runs on the inferred spec when there is one; otherwise on a *probe* launch (2 blocks
of 128 threads, pointer arguments bound to 2^18-element buffers, integer
arguments 64, out-of-bounds accesses reported instead of raised): the probe measures whether the
interpreter accepts the kernel as written, not whether its numbers are right. Third-party code is
read where it lies and never copied into the repository.

Each file runs in its own child process with a time limit, so a hang or crash is one row, not the
end of the run. Prints one table row per kernel and totals; `--json` writes the rows too.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

PROBE_ELEMS = 1 << 18
PROBE_INT = 64


def find_sources(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.cu") if q.is_file())
        elif p.suffix == ".cu":
            out.append(p)
    return out


class _Timeout(BaseException):  # not an Exception: nothing on the way may swallow it
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Timeout()


def _short(e: BaseException, n: int = 400) -> str:
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg}"[:n]


def _probe_args(parsed: Any, k: Any, targs: Any, rng: Any) -> dict[str, Any]:
    """Arguments for a probe launch, typed as the interpreter resolves the parameters
    (typedefs, header types); a template type it cannot resolve becomes float."""

    from migrator.cuda.interp import ctypes_ as ct
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.runner import kernel_signature

    try:
        sig = kernel_signature(parsed, k.name, targs)
    except InterpError:  # template parameters deduced from arguments: float arrays
        sig = [(p.name, ct.ptr(ct.FLOAT) if p.pointer_depth else ct.INT) for p in k.params]
    args: dict[str, Any] = {}
    for name, t in sig:
        if t.kind in ("ptr", "array"):
            e = t.elem.scalar if t.elem is not None else ct.FLOAT
            e = e if e.dtype is not None else ct.FLOAT
            if e.kind == "float":
                args[name] = rng.standard_normal(PROBE_ELEMS).astype(e.dtype)
            else:
                args[name] = rng.integers(0, 16, PROBE_ELEMS).astype(e.dtype)
        elif t.kind == "float":
            args[name] = 0.5
        elif t.kind in ("int", "bool"):
            args[name] = PROBE_INT
        else:
            raise ValueError(f"probe cannot bind {name}: {t}")
    return args


def run_one_file(
    path: Path, migrate: bool, per_kernel: float, include_dirs: list[str] | None = None
) -> list[dict[str, Any]]:
    import numpy as np

    from migrator import api
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.runner import run_kernel
    from migrator.cuda.interp.spec_run import run_spec_full
    from migrator.cuda.parse import parse_file
    from migrator.cuda.source import SourceError
    from migrator.infer import InferenceError, infer_spec

    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    try:
        tu = api.inspect(path, include_dirs=include_dirs)
    except SourceError as e:
        return [{"file": str(path), "kernel": "-", "parsed": False, "spec": "-", "interp": "-",
                 "family": "-", "status": "-", "diag": _short(e), "seconds": 0.0}]  # fmt: skip
    parsed = parse_file(path, include_dirs)
    signal.signal(signal.SIGALRM, _alarm)
    for k in tu.global_kernels:
        launched = any(site.kernel == k.name for site in tu.launch_sites)
        row: dict[str, Any] = {"file": str(path), "kernel": k.name, "parsed": True,
                               "launched": launched}  # fmt: skip
        t1 = time.perf_counter()
        spec = None
        # each stage has its own time limit: a slow inference does not cost the interpreter
        # its run (the interpreter then runs on a probe)
        signal.alarm(int(per_kernel))
        try:
            spec = infer_spec(tu, k, include_dirs=include_dirs)
            row["spec"] = "inferred"
            if spec.relations:  # sizes the kernel assumes (`N % 128 == 0`)
                row["relations"] = spec.relations
        except _Timeout:
            row["spec"] = f"no: inference timed out after {per_kernel:.0f} s"
        except InferenceError as e:
            row["spec"] = "no: " + " ".join(str(e).split())[:120]
        except Exception as e:  # an internal error of the tool: the worst kind of row
            row["spec"] = "INTERNAL " + _short(e)
        finally:
            signal.alarm(0)
        signal.alarm(int(per_kernel))
        try:
            if spec is not None:
                sz = spec.all_size_sets()[0]
                run_spec_full(spec, sz, source=path)
                row["interp"] = "ok"
            else:
                site = next((s for s in tu.launch_sites if s.kernel == k.name), None)
                targs = site.template_args if site and site.template_args else None
                if targs is None and k.instantiations:
                    targs = k.instantiations[0]
                args = _probe_args(parsed, k, targs, np.random.default_rng(0))
                run_kernel(parsed, k.name, 2, 128, args, shared_bytes=48 * 1024,
                           template_args=targs,
                           options=InterpOptions(oob="report"))  # fmt: skip
                row["interp"] = "ok (probe)"
        except _Timeout:
            row["interp"] = f"timeout after {per_kernel:.0f} s"
        except Exception as e:
            row["interp"] = _short(e)
        finally:
            signal.alarm(0)
        if migrate:
            from migrator.migration import migrate as do_migrate

            # timed as a user's first `migrate` of the kernel: nothing kept from the stages above
            api.clear_caches()
            signal.alarm(int(per_kernel))
            t2 = time.perf_counter()
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    m = do_migrate(path, kernel=k.name, out_dir=tmp, check=True,
                                   include_dirs=include_dirs)  # fmt: skip
                km = m.kernels[0]
                row["family"] = km.family or "-"
                row["status"] = km.status
                # why a kernel is not complete: an error, else a warning, else the first note
                rank = {"error": 0, "warning": 1}
                ranked = sorted(km.diagnostics, key=lambda d: rank.get(d.severity, 2))
                top = ranked[0] if ranked else None
                row["diag"] = f"{top.id} {top.message}"[:160] if top else ""
            except _Timeout:
                row["diag"] = f"migrate timed out after {per_kernel:.0f} s"
            except Exception as e:
                row["diag"] = "INTERNAL " + _short(e)
            finally:
                signal.alarm(0)
                # what a user waits for: `migrate kernel.cu` with its check (inference included)
                row["migrate_seconds"] = round(time.perf_counter() - t2, 2)
        row.setdefault("spec", "no: timeout or error before inference finished")
        row.setdefault("interp", "-")
        row.setdefault("family", "-")
        row.setdefault("status", "-")
        row.setdefault("diag", "")
        row["seconds"] = round(time.perf_counter() - t1, 2)
        rows.append(row)
    if not rows:
        rows.append({"file": str(path), "kernel": "-", "parsed": True, "spec": "-", "interp": "-",
                     "family": "-", "status": "-", "diag": "no __global__ kernel",
                     "seconds": round(time.perf_counter() - t0, 2)})  # fmt: skip
    return rows


def _child(path: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    cmd = [sys.executable, __file__, "--one", str(path), "--kernel-timeout", str(args.timeout)]
    if args.no_migrate:
        cmd.append("--no-migrate")
    for d in args.include:
        cmd += ["-I", str(Path(d).resolve())]
    limit = args.timeout * 120 + 60  # three stages per kernel, about forty kernels
    try:
        # (files run side by side already use the cores: each migration stays on one)
        env = {**os.environ, "C2N_WORKERS": "1"} if args.jobs > 1 else None
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env)
    except subprocess.TimeoutExpired:
        return [{"file": str(path), "kernel": "?", "parsed": "?", "spec": "?", "interp": "?",
                 "family": "-", "status": "-", "diag": f"file timeout {limit} s",
                 "seconds": limit}]  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return [{"file": str(path), "kernel": "?", "parsed": "?", "spec": "?", "interp": "?",
                 "family": "-", "status": "-", "diag": f"CRASH {tail}"[:160],
                 "seconds": 0.0}]  # fmt: skip
    return [json.loads(ln) for ln in lines]


def totals(rows: list[dict[str, Any]]) -> str:
    ks = [r for r in rows if r["kernel"] not in ("-", "?")]
    n = len(ks)
    ran = sum(1 for r in ks if str(r["interp"]).startswith("ok"))
    ran_spec = sum(1 for r in ks if r["interp"] == "ok")
    inferred = sum(1 for r in ks if r["spec"] == "inferred")
    launched = [r for r in ks if r.get("launched")]
    inferred_launched = sum(1 for r in launched if r["spec"] == "inferred")
    internal = sum(
        1 for r in rows if "INTERNAL" in str(r["diag"]) + str(r["spec"]) or "CRASH" in r["diag"]
    )
    status = Counter(r["status"] for r in ks)
    return (
        f"files {len({r['file'] for r in rows})}, kernels {n}; parsed "
        f"{sum(1 for r in ks if r['parsed'] is True)}; interpreter ran {ran} "
        f"({ran_spec} on an inferred spec, {ran - ran_spec} on a probe); spec inferred "
        f"{inferred} ({inferred_launched} of the {len(launched)} kernels the files' host code "
        "launches); migrate: "
        + ", ".join(f"{s} {c}" for s, c in sorted(status.items()))
        + f"; internal errors {internal}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds per stage of a kernel (inference, interpreter, migrate)",
    )
    ap.add_argument("--kernel-timeout", type=float, default=60.0, help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the rows as JSON lines to this file")
    ap.add_argument("--no-migrate", action="store_true")
    ap.add_argument("--only", help="files whose path contains this")
    ap.add_argument("-I", dest="include", action="append", default=[],
                    help="an include directory for every file (as nvcc -I)")  # fmt: skip
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        rows = run_one_file(
            Path(args.one), not args.no_migrate, args.kernel_timeout, args.include or None
        )
        for row in rows:
            print(json.dumps(row), flush=True)
        return 0
    files = find_sources(args.paths)
    if args.only:
        files = [f for f in files if args.only in str(f)]
    if not files:
        print("no .cu files found", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for res in pool.map(lambda f: _child(f, args), files):
            rows += res
            for r in res:
                print(
                    f"{Path(r['file']).name[:28]:28} {str(r['kernel'])[:32]:32} "
                    f"spec={str(r.get('spec'))[:40]:40} interp={str(r.get('interp'))[:70]:70} "
                    f"{r['family']:12} {r['status']:9} {r['seconds']:6} {r['diag'][:100]}",
                    flush=True,
                )
    print(totals(rows))
    if args.json:
        Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
