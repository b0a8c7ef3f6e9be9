"""Task records round-trip exactly; batch runs are resumable after SIGKILL with no duplicates."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from migrator import dataset
from migrator.dataset.batch import finished_ids, run_batch

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def test_task_record_round_trips_through_jsonl(tmp_path: Path) -> None:
    tasks = [dataset.build_task(CORPUS / f"{s}.cu") for s in ("vector_add", "layernorm")]
    assert all(t.reference_check_ok for t in tasks)
    assert tasks[1].expert_nki is not None and tasks[1].family == "rowwise"
    assert all(any(v % 32 for v in h.values()) for t in tasks for h in t.hidden_sizes)
    path = tmp_path / "tasks.jsonl"
    assert dataset.export_jsonl(tasks, path) == 2
    again = dataset.import_jsonl(path)
    assert again == tasks  # every field, exactly
    assert len({t.id for t in tasks}) == 2
    assert dataset.build_task(CORPUS / "vector_add.cu").id == tasks[0].id  # content-addressed


def test_batch_results_and_bad_items(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* x) { x[0] = ; }\n")
    out = tmp_path / "r.jsonl"
    results = run_batch([CORPUS / "vector_add.cu", CORPUS / "bitonic_sort.cu", bad], out, jobs=2)
    by_path = {Path(r["path"]).name: r for r in results}
    assert by_path["vector_add.cu"]["status"] == "complete"
    assert by_path["bitonic_sort.cu"]["status"] == "partial"
    assert by_path["bad.cu"]["status"] == "failed" and "C2N1001" in by_path["bad.cu"]["error"]
    assert len(out.read_text().splitlines()) == 3


def test_torn_last_line_is_cut_on_resume(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps({"id": "a"}) + "\n" + '{"id": "b", "sta')
    assert finished_ids(out) == {"a"}
    assert out.read_text() == json.dumps({"id": "a"}) + "\n"


def test_sigkill_midway_then_resume_gives_the_full_set_once(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-m", "migrator.cli", "batch", str(CORPUS), "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline:
        if out.exists() and len(out.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = finished_ids(out)
    assert len(partial) >= 3, "the batch was killed before any result was written"
    r = subprocess.run([*cmd, "--resume"], cwd=tempfile.gettempdir(), capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)), "a result was duplicated"
    full = {i.id for i in __import__("migrator.dataset.batch", fromlist=["x"]).plan_items([CORPUS])}
    assert set(ids) == full, "a result was lost"
    assert "total" in r.stdout


def test_ray_backend_without_ray_keeps_existing_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps({"id": "kept"}) + "\n")
    with pytest.raises(RuntimeError, match="needs Ray"):
        run_batch([CORPUS / "vector_add.cu"], out, backend="ray")
    assert finished_ids(out) == {"kept"}


def test_ray_backend_on_a_local_ray_instance(tmp_path: Path) -> None:
    pytest.importorskip("ray")  # in the test extras; CI runs this against a local instance
    out = tmp_path / "r.jsonl"
    (out).write_text(json.dumps({"id": f"{CORPUS / 'saxpy.cu'}::saxpy_kernel"}) + "\n")
    inputs = [CORPUS / "vector_add.cu", CORPUS / "saxpy.cu", CORPUS / "bitonic_sort.cu"]
    results = run_batch(inputs, out, backend="ray", resume=True)
    ids = [r["id"] for r in results]
    assert len(ids) == len(set(ids)) == 3  # the finished item was not run again
    by_path = {Path(r["path"]).name: r for r in results if "path" in r}
    assert by_path["vector_add.cu"]["status"] == "complete" and by_path["vector_add.cu"]["check_ok"]
    assert by_path["bitonic_sort.cu"]["status"] == "partial"


def test_batch_progress_bar_shows_counts(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "migrator.cli",
        "batch",
        str(CORPUS / "vector_add.cu"),
        str(CORPUS / "bitonic_sort.cu"),
        "--out",
        str(tmp_path / "r.jsonl"),
        "--progress",
        "bar",
    ]
    r = subprocess.run(cmd, cwd=tempfile.gettempdir(), capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2/2" in r.stderr and "1 complete 1 partial 0 failed" in r.stderr
    assert "total" in r.stdout


def test_batch_scores_a_directory_of_submissions(tmp_path: Path) -> None:
    from migrator.dataset.batch import summary
    from migrator.migration import migrate
    from migrator.score.mutate import make

    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "softmax_row.py").write_text((CORPUS / "expert" / "softmax_row_expert.py").read_text())
    generated = migrate(CORPUS / "vector_add.cu", out_dir=tmp_path, check=False).kernels[0]
    wrong = dict((m.name, src) for m, src in make(generated.nki_source))["drop_store_mask"]
    (subs / "vector_add_nki.py").write_text(wrong)
    inputs = [CORPUS / f"{s}.cu" for s in ("softmax_row", "vector_add", "saxpy")]
    results = run_batch(inputs, tmp_path / "s.jsonl", submissions=subs, seeds=1)
    by_kernel = {r["kernel"]: r for r in results}
    assert by_kernel["softmax_row_kernel"]["status"] == "pass"
    assert by_kernel["softmax_row_kernel"]["score"] >= 90
    assert by_kernel["vector_add_kernel"]["status"] == "fail"
    assert "C2N4005" in by_kernel["vector_add_kernel"]["rules"]
    assert by_kernel["saxpy_kernel"]["status"] == "missing"
    assert all(r["id"].startswith("score:") for r in results)
    table = summary(results)
    total = table.splitlines()[-1].split()
    assert "mean score" in table and total[1:6] == ["1", "1", "0", "1", "0"]  # pass..failed
