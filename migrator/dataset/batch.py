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
from migrator.diagnostics import diagnostics_text

Backend = Literal["local", "ray"]


class BatchItem(BaseModel):
    id: str  # "<path>::<kernel>", or "score:<path>::<kernel>" when a submission is scored
    path: str
    kernel: str | None
    scoring: bool = False  # score a submission instead of migrating
    submission: str | None = None  # the NKI file found for this kernel (None: missing)


def find_submission(submissions: Path, cu: Path, kernel: str | None) -> Path | None:
    """A submission for a kernel: `<kernel>.py` or `<kernel>_nki.py` (kernel name without
    `_kernel`), else `<cu stem>.py` or `<cu stem>_nki.py`."""
    names = [kernel.removesuffix("_kernel")] if kernel else []
    for stem in [*names, cu.stem]:
        for name in (f"{stem}.py", f"{stem}_nki.py"):
            if (submissions / name).is_file():
                return submissions / name
    return None


def plan_items(
    inputs: Iterable[str | Path], submissions: str | Path | None = None
) -> list[BatchItem]:
    """One item per `__global__` kernel of every CUDA file (a file that does not parse is one
    item, which will fail with its diagnostics). With `submissions` (a directory of NKI files),
    each item scores the kernel's submission instead of migrating it."""
    from migrator.cuda.frontend import analyze_file
    from migrator.cuda.source import SourceError

    items: list[BatchItem] = []
    for f in iter_sources(inputs):
        try:
            names = [k.name for k in analyze_file(f).global_kernels]
        except SourceError:
            names = []
        for name in names or [None]:
            item = BatchItem(id=f"{f}::{name or '?'}", path=str(f), kernel=name)
            if submissions is not None:
                sub = find_submission(Path(submissions), f, name)
                item = item.model_copy(update={
                    "id": f"score:{item.id}", "scoring": True,
                    "submission": str(sub) if sub else None,
                })  # fmt: skip
            items.append(item)
    return items


def run_item(item: BatchItem, check: bool = True, seeds: int = 2) -> dict[str, Any]:
    """Migrate one kernel (or score its submission); never raises (an exception becomes a
    failed result)."""
    from migrator.migration import migrate

    t0 = time.perf_counter()
    result: dict[str, Any] = {"id": item.id, "path": item.path, "kernel": item.kernel}
    if item.scoring:
        result.update(_score_item(item, seeds))
        result["seconds"] = round(time.perf_counter() - t0, 3)
        return result
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
        text = diagnostics_text(e) or f"{type(e).__name__}: {e}"
        result.update(status="failed", family=None, error=text[:500],
                      trace=traceback.format_exc(limit=3)[-800:])  # fmt: skip
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def _score_item(item: BatchItem, seeds: int) -> dict[str, Any]:
    """Score status: pass / fail / error (the scorer's verdict), missing (no submission file),
    failed (the task itself could not be set up)."""
    from migrator.cuda.frontend import analyze_file
    from migrator.patterns.registry import classify
    from migrator.score import score

    out: dict[str, Any] = {"submission": item.submission, "family": None}
    try:
        # the family is the classifier's verdict (as in `migrate`); score() itself migrates
        # the generated reference, so a full migration here would be done twice
        tu = analyze_file(item.path)
        kernel = tu.kernel(item.kernel) if item.kernel else tu.global_kernels[0]
        out["family"] = classify(tu, kernel).family
        if item.submission is None:
            return {**out, "status": "missing", "score": None}
        rep = score(item.path, item.submission, kernel=item.kernel, seeds=seeds)
        return {**out, "status": rep.verdict, "score": rep.score,
                "rules": sorted(rep.rule_ids()), "summary": rep.summary[:500]}  # fmt: skip
    except Exception as e:  # noqa: BLE001 - one bad item must not stop the batch
        text = diagnostics_text(e) or f"{type(e).__name__}: {e}"
        return {**out, "status": "failed", "score": None, "error": text[:500]}


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
    on_plan: Callable[[int, int], None] | None = None,
    submissions: str | Path | None = None,
    seeds: int = 2,
) -> list[dict[str, Any]]:
    """Run every item not yet in `out`; returns all results (old and new) in file order.
    With `submissions` (a directory of NKI files), score them instead of migrating.
    on_plan(total, already_done) is called once the items are planned, before any runs."""
    out = Path(out)
    if backend == "ray":
        _require_ray()  # before the results file is touched
    items = plan_items(inputs, submissions)
    done = finished_ids(out) if resume else set()
    if not resume and out.exists():
        out.unlink()
    todo = [i for i in items if i.id not in done]
    total = len(items)
    count = len(done)
    if on_plan is not None:
        on_plan(total, count)
    with open(out, "a", encoding="utf-8") as fh:
        for result in _execute(todo, jobs, backend, check, seeds, address):
            _append(fh, result)
            count += 1
            if on_result is not None:
                on_result(result, count, total)
    with open(out, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _execute(
    items: list[BatchItem],
    jobs: int,
    backend: Backend,
    check: bool,
    seeds: int,
    address: str | None,
) -> Iterable[dict[str, Any]]:
    if not items:
        return
    if backend == "ray":
        yield from _execute_ray(items, check, seeds, address)
        return
    if jobs <= 1:
        for item in items:
            yield run_item(item, check, seeds)
        return
    with ProcessPoolExecutor(max_workers=jobs, initializer=_one_core) as pool:
        futures = [pool.submit(run_item, item, check, seeds) for item in items]
        for fut in as_completed(futures):
            yield fut.result()


def _one_core() -> None:
    """A pool worker's migrations stay on one core (`migrator.workers`): the pool's other
    workers use the others."""
    os.environ["C2N_WORKERS"] = "1"


def _require_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("the ray backend needs Ray: pip install 'cuda2nki[dist]'") from e
    return ray


def _execute_ray(
    items: list[BatchItem], check: bool, seeds: int, address: str | None
) -> Iterable[dict[str, Any]]:
    ray = _require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, ignore_reinit_error=True, include_dashboard=False,
                 log_to_driver=False)  # fmt: skip
    try:
        remote = ray.remote(run_item)
        pending = [remote.remote(item, check, seeds) for item in items]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield ray.get(ready[0])
    finally:
        if started:
            ray.shutdown()


def summary(results: list[dict[str, Any]]) -> str:
    """Per family: migrated completely / partially / failed; for scored submissions, pass /
    fail / error / missing / failed and the mean score."""
    if any(r.get("id", "").startswith("score:") for r in results):
        return _table(results, ("pass", "fail", "error", "missing", "failed"), mean_score=True)
    return _table(results, ("complete", "partial", "failed"), mean_score=False)


def _table(results: list[dict[str, Any]], columns: tuple[str, ...], mean_score: bool) -> str:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(r.get("family") or "(none)", []).append(r)
    groups_total = {**dict(sorted(groups.items())), "total": results}
    head = f"{'family':<14}" + "".join(f" {c:>8}" for c in columns)
    lines = [head + (f" {'mean score':>10}" if mean_score else "")]
    for fam, rs in groups_total.items():
        c = Counter(r.get("status", "failed") for r in rs)
        line = f"{fam:<14}" + "".join(f" {c[col]:>8}" for col in columns)
        if mean_score:
            scores = [r["score"] for r in rs if r.get("score") is not None]
            line += f" {sum(scores) / len(scores):>10.1f}" if scores else f" {'-':>10}"
        lines.append(line)
    return "\n".join(lines)
