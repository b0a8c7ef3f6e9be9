"""Batch runs: migrate many kernels, one JSON line per result, resumable after any kill.

Each result is written as one line and flushed to disk (fsync) as soon as its item finishes, so
a run killed at any moment loses at most the items in flight; `resume=True` reads the finished
ids back (ignoring a torn last line) and runs only the rest — no result lost, none duplicated.
One bad item never stops the batch: its exception becomes a `failed` result. Backends: a local
process pool (default) or a Ray cluster (`ray.init(address=...)`, optional dependency).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from migrator.dataset.tasks import iter_sources

Backend = Literal["local", "ray"]


class BatchItem(BaseModel):
    id: str  # "<path>::<kernel>"
    path: str
    kernel: str | None


def plan_items(inputs: Iterable[str | Path]) -> list[BatchItem]:
    """One item per `__global__` kernel of every CUDA file (a file that does not parse is one
    item, which will fail with its diagnostics)."""
    from migrator.cuda.frontend import analyze_file
    from migrator.cuda.source import SourceError

    items: list[BatchItem] = []
    for f in iter_sources(inputs):
        try:
            names = [k.name for k in analyze_file(f).global_kernels]
        except SourceError:
            names = []
        for name in names or [None]:
            items.append(BatchItem(id=f"{f}::{name or '?'}", path=str(f), kernel=name))
    return items


def run_item(item: BatchItem, check: bool = True) -> dict[str, Any]:
    """Migrate one kernel; never raises (an exception becomes a failed result)."""
    from migrator.migration import migrate

    t0 = time.perf_counter()
    result: dict[str, Any] = {"id": item.id, "path": item.path, "kernel": item.kernel}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            m = migrate(item.path, kernel=item.kernel, out_dir=tmp, check=check)
        k = m.kernels[0]
        result.update(
            status=k.status, family=k.family, variant=k.variant,
            check_ok=k.check.ok if k.check else None,
            estimate_us=k.check.estimate_us if k.check else None,
            diagnostics=sorted({d.id for d in k.diagnostics if d.severity != "note"}),
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - one bad item must not stop the batch
        msg = getattr(e, "diagnostics", None)
        text = "; ".join(d.render() for d in msg) if msg else f"{type(e).__name__}: {e}"
        result.update(status="failed", family=None, error=text[:500],
                      trace=traceback.format_exc(limit=3)[-800:])  # fmt: skip
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def finished_ids(out: Path) -> set[str]:
    """Ids already in a results file; a torn last line (killed mid-write) is cut off."""
    if not out.is_file():
        return set()
    ids: set[str] = set()
    good = 0
    with open(out, "rb") as f:
        data = f.read()
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            ids.add(json.loads(line)["id"])
        except (json.JSONDecodeError, KeyError):
            break
        good += len(line)
    if good < len(data):
        with open(out, "r+b") as f:
            f.truncate(good)
    return ids


def _append(fh: Any, result: dict[str, Any]) -> None:
    fh.write(json.dumps(result, sort_keys=True) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def run_batch(
    inputs: Iterable[str | Path],
    out: str | Path,
    *,
    jobs: int = 1,
    backend: Backend = "local",
    resume: bool = False,
    check: bool = True,
    address: str | None = None,
    on_result: Callable[[dict[str, Any], int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every item not yet in `out`; returns all results (old and new) in file order."""
    out = Path(out)
    if backend == "ray":
        _require_ray()  # before the results file is touched
    items = plan_items(inputs)
    done = finished_ids(out) if resume else set()
    if not resume and out.exists():
        out.unlink()
    todo = [i for i in items if i.id not in done]
    total = len(items)
    count = len(done)
    with open(out, "a", encoding="utf-8") as fh:
        for result in _execute(todo, jobs, backend, check, address):
            _append(fh, result)
            count += 1
            if on_result is not None:
                on_result(result, count, total)
    with open(out, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _execute(
    items: list[BatchItem], jobs: int, backend: Backend, check: bool, address: str | None
) -> Iterable[dict[str, Any]]:
    if not items:
        return
    if backend == "ray":
        yield from _execute_ray(items, check, address)
        return
    if jobs <= 1:
        for item in items:
            yield run_item(item, check)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_item, item, check) for item in items]
        for fut in as_completed(futures):
            yield fut.result()


def _require_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("the ray backend needs Ray: pip install 'cuda2nki[dist]'") from e
    return ray


def _execute_ray(
    items: list[BatchItem], check: bool, address: str | None
) -> Iterable[dict[str, Any]]:
    ray = _require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, ignore_reinit_error=True, include_dashboard=False,
                 log_to_driver=False)  # fmt: skip
    try:
        remote = ray.remote(run_item)
        pending = [remote.remote(item, check) for item in items]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield ray.get(ready[0])
    finally:
        if started:
            ray.shutdown()


def summary(results: list[dict[str, Any]]) -> str:
    """Per family: migrated completely / partially / failed; checks passed."""
    by_family: dict[str, Counter[str]] = {}
    for r in results:
        fam = r.get("family") or "(none)"
        by_family.setdefault(fam, Counter())[r.get("status", "failed")] += 1
    lines = [f"{'family':<14} {'complete':>8} {'partial':>8} {'failed':>7}"]
    for fam in sorted(by_family):
        c = by_family[fam]
        lines.append(f"{fam:<14} {c['complete']:>8} {c['partial']:>8} {c['failed']:>7}")
    total = Counter(r.get("status", "failed") for r in results)
    lines.append(f"{'total':<14} {total['complete']:>8} {total['partial']:>8} {total['failed']:>7}")
    return "\n".join(lines)
