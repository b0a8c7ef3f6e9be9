"""The sandbox child: load the candidate with the NKI shim, run each trial, write results.

Started by `sandbox.run_candidate` as ``python -I -m migrator.score.child JOB_DIR``. Reads
``job.json`` and the read-only input files, loads the candidate once (state kept between calls
shows up as wrong results on the next trial's fresh inputs), and for each trial records the
outputs, how each returned value was produced, whether inputs changed or were read, the dtypes
the engines computed in, emulator findings and (when asked) the cost profile. Everything the
candidate raises becomes a per-trial status. An audit hook refuses sockets, subprocesses,
``ctypes`` and writes outside ``JOB_DIR/out`` once the harness has imported what it needs.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

import migrator.nki as mn
from migrator.nki import frontend, isa_dst, isa_legacy, language
from migrator.nki.cost import summarize
from migrator.nki.errors import (
    NkiConstraintError,
    NkiHostComputeError,
    NkiKernelError,
    NkiUnsupportedError,
)
from migrator.nki.storage import Buffer
from migrator.nki.tensor import Tensor, guard_host_access
from migrator.nki.trace import Engine
from migrator.score import npy
from migrator.score.performance import line_stats

_BLOCKED_PREFIXES = (
    "socket.",
    "subprocess.",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "os.system",
    "ctypes.",
    "pty.",
    "os.kill",
    "resource.setrlimit",
    "_thread.start_new_thread",
    "gc.",
    "sys.settrace",
    "sys.setprofile",
)
_FS_EVENTS = (
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.link",
    "os.symlink",
    "os.utime",
    "shutil.",
)
_BLOCKED_IMPORTS = {
    "socket",
    "subprocess",
    "ctypes",
    "multiprocessing",
    "threading",
    "pty",
    "urllib",
    "http",
    "requests",
    "asyncio",
    "signal",
    "resource",
}
_WATCHED = {"nl": language, "nisa_legacy": isa_legacy, "nisa": isa_dst, "frontend": frontend}


def _readable_roots(job: str) -> tuple[str, ...]:
    """Where the candidate may read: Python itself, installed packages, the emulator's own
    source, its job directory. Not the task's reference implementation, not other files."""
    import migrator

    roots = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(migrator.__file__),
        job,
        "/dev",
        "/proc/self",
    }
    return tuple(os.path.realpath(r) + os.sep for r in roots)


def _install_audit_hook(out_dir: str, job: str) -> None:
    out_dir = os.path.realpath(out_dir)
    readable = _readable_roots(job)

    def inside(path: Any, roots: tuple[str, ...] = (out_dir + os.sep,)) -> bool:
        if isinstance(path, int):
            return True
        try:
            return (os.path.realpath(os.fsdecode(path)) + os.sep).startswith(roots)
        except (TypeError, ValueError):
            return False

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(_BLOCKED_PREFIXES):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args and str(args[0]).split(".")[0] in _BLOCKED_IMPORTS:
            raise PermissionError(f"sandbox: import of {args[0]} is not allowed")
        if event == "open" and len(args) >= 2:
            mode, flags = args[1], args[2] if len(args) > 2 else 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            )
            if writing and not inside(args[0]):
                raise PermissionError(f"sandbox: writing {args[0]} is not allowed")
            if not writing and not inside(args[0], readable):
                raise PermissionError(f"sandbox: reading {args[0]} is not allowed")
        if event in ("os.listdir", "os.scandir") and args and not inside(args[0], readable):
            raise PermissionError(f"sandbox: listing {args[0]} is not allowed")
        if event.startswith(_FS_EVENTS) and args and not inside(args[0]):
            raise PermissionError(f"sandbox: {event} is not allowed")

    sys.addaudithook(hook)


def _snapshot() -> dict[str, int]:
    """Identities of the emulator's and scorer's functions and classes (and their methods).

    Only callables and classes are watched: module-level counters may legitimately change."""
    out: dict[str, int] = {}
    for m, mod in _WATCHED.items():
        for k, v in vars(mod).items():
            out[f"{m}.{k}"] = id(v)
    for name, mod in list(sys.modules.items()):
        if not name.startswith("migrator.") or mod is None:
            continue
        for k, v in list(vars(mod).items()):
            if isinstance(v, type) and v.__module__ == name:
                for a, f in list(vars(v).items()):
                    if callable(f) or isinstance(f, staticmethod | classmethod | property):
                        out[f"{name}.{k}.{a}"] = id(f)
            elif callable(v) and getattr(v, "__module__", None) == name:
                out[f"{name}.{k}"] = id(v)
    return out


def _find_kernel(module: Any, name: str | None) -> tuple[str, Any]:
    if name and hasattr(module, name):
        return name, getattr(module, name)
    kernels = [
        (k, v)
        for k, v in vars(module).items()
        if isinstance(v, frontend.Kernel) and not k.startswith("_")
    ]
    if len(kernels) == 1:
        return kernels[0]
    have = ", ".join(k for k, _ in kernels) or "none"
    raise LookupError(f"no kernel {name!r} in the candidate (nki.jit kernels: {have})")


def _raw_kind(value: Any, inputs: list[Tensor]) -> str:
    if isinstance(value, Tensor):
        for k, t in enumerate(inputs):
            if value.storage is t.storage or value.storage.data is t.storage.data:
                return f"input:{k}"
        if value.storage.buffer is not Buffer.SHARED_HBM and not value.storage.buffer.is_hbm:
            return f"tensor:{value.storage.buffer.value}"
        return "nki_hbm" if value.storage.origin is not None else "nki_hbm_unknown"
    if isinstance(value, np.ndarray):
        return "ndarray"
    return f"other:{type(value).__name__}"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "V" or a.dtype != b.dtype:
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def _candidate_frame(e: BaseException, candidate: str) -> traceback.FrameSummary | None:
    """The innermost frame of `e`'s traceback in the candidate's file, if any."""
    name = Path(candidate).name
    mine = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).name == name]
    return mine[-1] if mine else None


def _run_trial(
    kernel: Any, trial: dict[str, Any], job: Path, target: str, kernel_file: str = ""
) -> dict[str, Any]:
    dtypes = trial.get("input_dtypes") or [None] * len(trial["inputs"])
    originals = [npy.load(job / "in" / n, d) for n, d in zip(trial["inputs"], dtypes, strict=False)]
    arrays = [np.array(a, copy=True) for a in originals]
    handles = [Tensor.wrap_input(a, name=f"arg{k}") for k, a in enumerate(arrays)]
    raw: list[Any] = []
    fn = kernel.fn if isinstance(kernel, frontend.Kernel) else kernel
    grid: tuple[int, ...] = ()
    if isinstance(kernel, frontend.GridLaunch):
        fn, grid = kernel.kernel.fn, kernel.grid
    if trial.get("grid"):
        grid = tuple(int(g) for g in trial["grid"])

    @functools.wraps(fn)  # the emulator locates a failure in the kernel's own file
    def watched(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        raw.append(result)
        return result

    # unwritten output elements are reported, not raised: the scorer excuses the ones the
    # CUDA original never writes either (pitch padding) and fails the others (C2N4040)
    options = mn.EmulatorOptions(target=target, uninit_outputs="report")
    res: dict[str, Any] = {"index": trial["index"], "status": "ok"}
    try:
        outs, run = frontend.launch(
            watched, tuple(handles), dict(trial["kwargs"]), grid=grid, options=options
        )
    except NkiConstraintError as e:
        res.update(status="constraint", code=e.code, error=str(e), location=str(e.location))
        return res
    except NkiHostComputeError as e:  # values taken out of NKI onto the host
        res.update(status="host_compute", error=str(e))
        return res
    except NkiUnsupportedError as e:
        res.update(status="unsupported", error=str(e))
        return res
    except NkiKernelError as e:
        cause = e.__cause__
        status = "memory" if isinstance(cause, MemoryError) else "crash"
        res.update(status=status, error=str(e))
        return res
    except MemoryError:
        res.update(status="memory", error="MemoryError")
        return res
    except Exception as e:  # anything else the candidate raised outside the emulator's wrap
        # the candidate's own line (a refused operation surfaces in this module's audit hook)
        tb = traceback.extract_tb(e.__traceback__)
        frame = _candidate_frame(e, kernel_file) or (tb[-1] if tb else None)
        where = f"{frame.filename}:{frame.lineno}" if frame else ""
        res.update(status="crash", error=f"{where}: {type(e).__name__}: {e}")
        return res
    values = list(outs) if isinstance(outs, tuple | list) else [outs]
    last = raw[-1] if raw else None
    raws = list(last) if isinstance(last, tuple | list) else [last]
    files: list[str] = []
    out_dtypes: list[str] = []
    for j, v in enumerate(values):
        name = f"{trial['index']}_{j}.npy"
        try:
            arr = np.asarray(v)
            if arr.dtype == object:
                raise TypeError("object array")
        except (TypeError, ValueError):
            arr = np.asarray(np.nan)
        out_dtypes.append(npy.save(job / "out" / name, arr))
        files.append(name)
    unwritten: list[str | None] = []  # per output: a mask file of the elements never written
    for j, r in enumerate(raws):
        valid = r.read()[1] if isinstance(r, Tensor) else None
        if valid is not None and not valid.all() and j < len(values):
            name = f"{trial['index']}_{j}_unwritten.npy"
            np.save(job / "out" / name, ~np.asarray(valid).reshape(np.shape(values[j])))
            unwritten.append(name)
        else:
            unwritten.append(None)
    reads: set[int] = set()
    for r, _ in run.deps:
        reads.update(r)
    compute = {i.dtype for i in run.trace if i.engine is not Engine.DMA}
    res.update(
        output_files=files,
        output_dtypes=out_dtypes,
        raw_kinds=[_raw_kind(v, handles) for v in raws],
        inputs_mutated=[
            k
            for k, (h, o) in enumerate(zip(handles, originals, strict=True))
            if not _same(np.asarray(h.storage.data), o)
        ],
        inputs_read=[h.storage.uid in reads for h in handles],
        compute_dtypes=sorted(compute),
        matmul_dtypes=sorted({i.dtype for i in run.trace if i.flops}),
        instr_names=sorted({i.name for i in run.trace}),  # construct evidence (fidelity)
        findings=[str(f) for f in run.findings if f.code != "err_uninitialized_output"],
        unwritten_files=unwritten,
        instructions=len(run.trace),
    )
    if trial.get("profile"):
        res["profile"] = summarize(run, top=8).model_dump(mode="json")
        res["lines"] = line_stats(run)
    return res


def main(argv: list[str]) -> int:
    job = Path(argv[0]).resolve()
    spec = json.loads((job / "job.json").read_text())
    if "--drop-privileges" in argv and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    _install_audit_hook(str(job / "out"), str(job))
    guard_host_access()  # the candidate's values flow through NKI instructions only
    before = _snapshot()
    result: dict[str, Any] = {"trials": [], "patched": []}
    module = None
    try:
        module = mn.load_kernel_module(job / spec["candidate"])
        result["kernel_name"], kernel = _find_kernel(module, spec["kernel"])
    except BaseException as e:  # noqa: BLE001 - any load failure is a result, not a crash
        frame = _candidate_frame(e, spec["candidate"])
        where = f"{frame.filename}:{frame.lineno}: " if frame else ""
        result["load_error"] = f"{where}{type(e).__name__}: {e}"
        result["missing_kernel"] = module is not None and isinstance(e, LookupError)
        kernel = None
    if kernel is not None:
        for trial in spec["trials"]:
            try:
                result["trials"].append(
                    _run_trial(kernel, trial, job, spec["target"], spec["candidate"])
                )
            except BaseException as e:  # noqa: BLE001 - SystemExit etc. from the candidate
                result["trials"].append(
                    {
                        "index": trial["index"],
                        "status": "crash",
                        "error": f"{type(e).__name__}: {e}",
                    }
                )
    after = _snapshot()
    result["patched"] = sorted(k for k in before if after.get(k, before[k]) != before[k])
    watched = tuple(f"{m}." for m in _WATCHED)
    result["patched"] += sorted(k for k in after if k not in before and k.startswith(watched))
    if module is not None:  # the kernel's own view of NKI (`nl.add = my_add` at import time)
        from migrator.nki.shim import replaced_api

        result["patched"] += replaced_api(vars(module))
    (job / "out" / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
