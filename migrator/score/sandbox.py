"""Run a candidate NKI kernel in a separate, limited process and collect structured results.

The child (`migrator.score.child`) is started with ``python -I`` (no PYTHON* variables, no user
site, no cwd on ``sys.path``) and:

* a private temporary directory as cwd and ``HOME``/``TMPDIR``;
* an environment scrubbed to an allow-list (``PATH``, ``LANG`` and single-threaded BLAS), so
  no inherited secrets;
* ``resource`` limits: CPU seconds, address space, file size, open files, no core dumps;
* no network: a fresh network namespace (``unshare -n``, or ``unshare -rn`` without root) when
  the OS permits it (probed once), and in any case an audit hook in the child that refuses
  sockets, subprocesses, ``ctypes`` and writes outside its output directory;
* when started as root, the child drops to ``nobody`` before loading the candidate.

Inputs go to the child as read-only ``.npy`` files that it loads into private arrays; the
parent keeps its own copies, so the candidate cannot change what it is compared against.
Crashes, hangs and limit hits come back as a `SandboxResult` with a status, never as an
exception of the scorer.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from migrator.score import npy

Status = Literal["ok", "crash", "timeout", "cpu_limit", "memory_limit", "protocol_error"]
NOBODY = 65534
_SOURCE_ROOT = Path(__file__).resolve().parents[2]
ENV_ALLOW = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONHASHSEED": "0",
}


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed candidate run (all trials share one process)."""

    cpu_seconds: int = 60
    wall_seconds: float = 120.0
    memory_bytes: int = 4 << 30
    file_bytes: int = 256 << 20
    open_files: int = 256


@dataclass(frozen=True)
class TrialJob:
    """One kernel call: positional inputs (in spec order) and keyword scalars."""

    index: int
    inputs: list[np.ndarray]
    kwargs: dict[str, Any]
    profile: bool = False
    grid: tuple[int, ...] = ()  # an SPMD launch grid (`migrate profile --grid`)


@dataclass
class SandboxResult:
    status: Status
    detail: str = ""
    trials: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[int, list[np.ndarray]] = field(default_factory=dict)
    # per trial and output: elements the candidate never wrote (None: it wrote them all)
    unwritten: dict[int, list[np.ndarray | None]] = field(default_factory=dict)
    kernel_name: str | None = None
    load_error: str | None = None
    missing_kernel: bool = False  # the file loaded, but has no kernel of the name asked for
    patched: list[str] = field(default_factory=list)
    stderr_tail: str = ""
    wall_s: float = 0.0
    isolation: list[str] = field(default_factory=list)


@functools.cache
def network_isolation() -> list[str]:
    """The command prefix that gives the child an empty network namespace, or []."""
    if not shutil.which("unshare"):
        return []
    for prefix in (["unshare", "-n", "--"], ["unshare", "-rn", "--"]):
        try:
            r = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, env=ENV_ALLOW)
        except (OSError, subprocess.SubprocessError):
            continue
        if r.returncode == 0:
            return prefix
    return []


def _preexec(limits: Limits) -> None:  # runs in the forked child before exec
    def cap(which: int, value: int) -> None:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))

    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 2))
    cap(resource.RLIMIT_AS, limits.memory_bytes)
    cap(resource.RLIMIT_FSIZE, limits.file_bytes)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CORE, 0)


def run_candidate(
    candidate: str | Path,
    kernel: str | None,
    trials: list[TrialJob],
    *,
    limits: Limits | None = None,
    target: str = "trn2",
) -> SandboxResult:
    """Run every trial of `candidate` in one sandboxed child process."""
    limits = limits or Limits()
    candidate = Path(candidate)
    with tempfile.TemporaryDirectory(prefix="c2n_score_") as tmp:
        job = Path(tmp)
        try:
            return _run(job, candidate, kernel, trials, limits, target)
        finally:
            _make_removable(job)


def _make_removable(job: Path) -> None:
    for p in [job, *job.rglob("*")]:
        with contextlib.suppress(OSError):
            p.chmod(0o700 if p.is_dir() else 0o600)


def _run(
    job: Path,
    candidate: Path,
    kernel: str | None,
    trials: list[TrialJob],
    limits: Limits,
    target: str,
) -> SandboxResult:
    (job / "in").mkdir()
    (job / "out").mkdir()
    (job / "home").mkdir()
    shutil.copyfile(candidate, job / candidate.name)  # `candidate` as the caller wrote it
    spec: dict[str, Any] = {
        "candidate": candidate.name,
        "kernel": kernel,
        "target": target,
        "trials": [],
    }
    for t in trials:
        names, dtypes = [], []
        for k, arr in enumerate(t.inputs):
            name = f"{t.index}_{k}.npy"
            dtypes.append(npy.save(job / "in" / name, arr))
            names.append(name)
        spec["trials"].append(
            {"index": t.index, "inputs": names, "input_dtypes": dtypes, "kwargs": t.kwargs,
             "profile": t.profile, "grid": list(t.grid)}
        )  # fmt: skip
    (job / "job.json").write_text(json.dumps(spec))
    drop = os.geteuid() == 0
    for p in [job / candidate.name, job / "job.json", *(job / "in").iterdir()]:
        p.chmod(0o444)
    for d in (job, job / "in"):
        d.chmod(0o755)
    if drop:
        for d in (job / "out", job / "home"):
            os.chown(d, NOBODY, NOBODY)
    prefix = network_isolation()
    env = {**ENV_ALLOW, "HOME": str(job / "home"), "TMPDIR": str(job / "home")}
    # -I: no PYTHON* variables, no user site, no cwd on sys.path; the source tree goes last on
    # sys.path so that an uninstalled checkout works too (an installed migrator wins)
    boot = (
        f"import sys; sys.path.append({str(_SOURCE_ROOT)!r}); "
        "from migrator.score.child import main; sys.exit(main(sys.argv[1:]))"
    )
    argv = [*prefix, sys.executable, "-I", "-c", boot, str(job)]
    if drop:
        argv.append("--drop-privileges")
    isolation = ["process", "rlimits", "scrubbed-env", "private-tmpdir", "audit-hook"]
    isolation += ["netns"] if prefix else []
    isolation += ["nobody"] if drop else []
    t0 = time.perf_counter()
    # stdout is discarded and stderr goes to a file (bounded by RLIMIT_FSIZE): a candidate
    # printing without end cannot fill the scorer's memory
    with open(job / "stderr.txt", "wb") as err_file:
        proc = subprocess.Popen(
            argv,
            cwd=job,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            preexec_fn=functools.partial(_preexec, limits),
            start_new_session=True,
        )
        try:
            proc.wait(timeout=limits.wall_seconds)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            timed_out = True
    res = SandboxResult(status="ok", wall_s=time.perf_counter() - t0, isolation=isolation)
    res.stderr_tail = _scrub(_tail(job / "stderr.txt"), job, candidate)
    rc = proc.returncode
    if timed_out:
        res.status, res.detail = "timeout", f"no result within {limits.wall_seconds:g} s"
        return res
    if rc in (-signal.SIGXCPU, -signal.SIGKILL) and _cpu_used(res.wall_s, limits):
        res.status, res.detail = "cpu_limit", f"CPU time limit of {limits.cpu_seconds} s hit"
        return res
    result_file = job / "out" / "result.json"
    if not result_file.is_file():
        memory = "MemoryError" in res.stderr_tail or rc == -signal.SIGKILL
        res.status = "memory_limit" if memory else "crash"
        res.detail = f"child exited with status {rc} and no result: {res.stderr_tail[-400:]}"
        return res
    try:
        data = json.loads(_scrub(result_file.read_text(), job, candidate))
        res.kernel_name = data.get("kernel_name")
        res.load_error = data.get("load_error")
        res.missing_kernel = bool(data.get("missing_kernel"))
        res.patched = list(data.get("patched", []))
        res.trials = list(data.get("trials", []))
        for t in res.trials:
            outs = []
            dtypes = t.get("output_dtypes") or [None] * len(t.get("output_files", []))
            for name, dt in zip(t.get("output_files", []), dtypes, strict=False):
                path = (job / "out" / Path(name).name).resolve()
                outs.append(npy.load(path, dt if isinstance(dt, str) else None))
            res.outputs[int(t["index"])] = outs
            masks: list[np.ndarray | None] = []
            for name in t.get("unwritten_files") or []:
                path = (job / "out" / Path(name).name).resolve() if name else None
                masks.append(np.load(path, allow_pickle=False) if path else None)
            res.unwritten[int(t["index"])] = masks
    except (OSError, ValueError, KeyError, TypeError) as e:
        res.status, res.detail = "protocol_error", f"unreadable child result: {e}"
        return res
    if rc != 0:
        res.status, res.detail = "crash", f"child exited with status {rc}"
    return res


def _tail(path: Path, size: int = 2000) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - size))
        return f.read().decode("utf-8", "replace")


def _cpu_used(wall: float, limits: Limits) -> bool:
    return wall >= limits.cpu_seconds * 0.5


def _scrub(text: str, job: Path, candidate: Path) -> str:
    """Map the sandbox copy's path back to the candidate's own path (stable reports)."""
    return text.replace(str(job / candidate.name), str(candidate)).replace(str(job), "<sandbox>")
