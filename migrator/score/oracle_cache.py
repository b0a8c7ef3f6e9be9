"""A cache of the CUDA oracle's results per trial, so that scoring many candidates of one task
runs the CUDA original once.

The oracle's outputs (fp32, rounded to the task's dtypes) and the float64 truth depend only on
the task and the trial: the preprocessed CUDA source (headers included), the spec, the trial's
seed, distribution and sizes, and the interpreter that ran them. Each entry is one `.npz` file
named by a hash of all of those; a change to any of them is a different entry, never a stale
one. Entries are written atomically (a temporary file renamed into place), so concurrent
scorers share a directory safely.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from migrator import __version__
from migrator.contract import TaskSpec, np_dtype
from migrator.score.protocol import Oracle, TrialPlan

FORMAT = 1  # bump when what an entry holds changes


def default_dir() -> Path:
    """`$XDG_CACHE_HOME/cuda2nki/oracle` (default `~/.cache/cuda2nki/oracle`)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuda2nki" / "oracle"


@functools.cache
def _code_hash() -> str:
    """The code that decides an oracle's results (the interpreter, the contract, the trial
    inputs): a change to any of it, released or not, is a different cache entry."""
    root = Path(__file__).resolve().parents[1]
    files = sorted((root / "cuda").rglob("*.py")) + [
        root / "contract.py",
        root / "check.py",
        root / "score" / "protocol.py",
    ]
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(root).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def task_key(task: TaskSpec) -> str:
    """What the oracle's results depend on besides the trial: the preprocessed source, the
    spec (without where it was read from) and the tool's version."""
    from migrator.cuda.source import preprocess, read_source

    include_dirs, defines = task.preprocessor()
    pre = preprocess(read_source(task.cuda_source_path()), include_dirs, defines)
    blob = {
        "format": FORMAT,
        "version": __version__,
        "code": _code_hash(),
        "source": hashlib.sha256(pre.text.encode()).hexdigest(),  # headers included
        "spec": task.model_dump(mode="json", exclude={"path"}),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:24]


class OracleCache:
    """Oracle results of one task, one file per trial under `root/<task key>/`."""

    def __init__(self, root: str | Path, task: TaskSpec) -> None:
        self.dir = Path(root) / task_key(task)

    def _path(self, plan: TrialPlan) -> Path:
        sizes = ",".join(f"{k}={v}" for k, v in sorted(plan.sizes.items()))
        name = hashlib.sha256(f"{plan.seed}|{plan.distribution}|{sizes}".encode()).hexdigest()
        return self.dir / f"{name[:24]}.npz"

    def get(self, plan: TrialPlan) -> Oracle | None:
        path = self._path(plan)
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                views = meta.get("views", {})

                def arr(k: str) -> np.ndarray:
                    a = z[k]
                    return a.view(np_dtype(views[k])) if k in views else a

                inputs = {n: arr(f"in_{i}") for i, n in enumerate(meta["inputs"])}
                cuda = [arr(f"cuda_{i}") for i in range(meta["outputs"])]
                truth = [arr(f"truth_{i}") for i in range(meta["outputs"])]
        except (OSError, KeyError, ValueError):  # absent, or unreadable: run the oracle
            return None
        return Oracle(inputs=inputs, cuda=cuda, truth=truth, error=meta["error"])

    def put(self, plan: TrialPlan, oracle: Oracle) -> None:
        arrays: dict[str, np.ndarray] = {}
        names = list(oracle.inputs)
        for i, n in enumerate(names):
            arrays[f"in_{i}"] = oracle.inputs[n]
        for i, (c, t) in enumerate(zip(oracle.cuda, oracle.truth, strict=True)):
            arrays[f"cuda_{i}"], arrays[f"truth_{i}"] = c, t
        # bf16/fp8 (ml_dtypes) have no .npz form: stored as their bits, viewed back on load
        views = {k: a.dtype.name for k, a in arrays.items() if a.dtype.kind == "V"}
        for k in views:
            arrays[k] = arrays[k].view(f"u{arrays[k].dtype.itemsize}")
        meta = {"inputs": names, "outputs": len(oracle.cuda), "error": oracle.error,
                "views": views}  # fmt: skip
        arrays["meta"] = np.array(json.dumps(meta))
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, self._path(plan))
        except OSError:  # a read-only or full disk costs speed, never a score
            return
