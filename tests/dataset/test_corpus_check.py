"""`migrate corpus-check` passes a sound entry and names the failing step of broken ones."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from migrator.dataset.corpus_check import check_entry

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def _copy(stem: str, dest: Path) -> Path:
    for suffix in (".cu", ".toml", ".py"):
        shutil.copy(CORPUS / f"{stem}{suffix}", dest / f"{stem}{suffix}")
    return dest / f"{stem}.cu"


def test_sound_entry_passes_every_step(tmp_path: Path) -> None:
    r = check_entry(_copy("saxpy", tmp_path))
    assert r.ok, r.steps
    assert [s.name for s in r.steps] == ["spec", "parse", "interpreter", "generated NKI"]
    assert all(s.status == "ok" for s in r.steps)


def test_wrong_numpy_reference_fails_the_interpreter_step(tmp_path: Path) -> None:
    cu = _copy("saxpy", tmp_path)
    ref = tmp_path / "saxpy.py"
    ref.write_text(ref.read_text().replace("np.float32(a))", "np.float32(a) + 1e-3)"))
    r = check_entry(cu, score=False)
    assert not r.ok
    (step,) = [s for s in r.steps if s.status == "failed"]
    assert step.name == "interpreter" and "differs from the numpy reference" in step.detail


def test_cli_reports_missing_spec_and_exits_1(tmp_path: Path) -> None:
    _copy("vector_add", tmp_path)
    (tmp_path / "orphan.cu").write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    cmd = [sys.executable, "-m", "migrator.cli", "corpus-check", str(tmp_path), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                       timeout=300)  # fmt: skip
    assert p.returncode == 1, p.stderr
    rows = {r["entry"]: r for r in map(json.loads, p.stdout.splitlines())}
    assert rows["orphan"]["steps"][0] == {"name": "spec", "status": "failed",
                                          "detail": "no spec sidecar orphan.toml"}  # fmt: skip
    assert all(s["status"] == "ok" for s in rows["vector_add"]["steps"])
    p = subprocess.run([sys.executable, "-m", "migrator.cli", "corpus-check", "/nonexistent"],
                       capture_output=True, text=True, cwd=tempfile.gettempdir())  # fmt: skip
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr
