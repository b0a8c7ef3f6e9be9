"""The sandbox: crashes and limits are results; no secrets, no writes outside, no network."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from migrator.score.sandbox import Limits, TrialJob, run_candidate

HEADER = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\nimport os\n\n"


def _run(tmp_path: Path, body: str, **kw) -> object:
    f = tmp_path / "cand.py"
    f.write_text(HEADER + "@nki.jit\ndef k(a):\n" + body)
    jobs = [TrialJob(0, [np.ones(4, np.float32)], {})]
    return run_candidate(f, "k", jobs, **kw)


def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("C2N_TEST_SECRET", "hunter2")
    r = _run(tmp_path, "    raise RuntimeError(repr(sorted(os.environ)))\n")
    err = r.trials[0]["error"]
    assert "C2N_TEST_SECRET" not in err and "PATH" in err
    assert r.trials[0]["status"] == "crash"


def test_writes_outside_the_sandbox_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "leak.txt"
    r = _run(tmp_path, f"    open({str(target)!r}, 'w').write('x')\n    return a\n")
    assert r.trials[0]["status"] == "crash" and "not allowed" in r.trials[0]["error"]
    assert not target.exists()


def test_subprocess_and_network_are_refused(tmp_path: Path) -> None:
    r = _run(tmp_path, "    os.system('true')\n    return a\n")
    assert "not allowed" in r.trials[0]["error"]
    r = _run(tmp_path, "    import socket\n    socket.socket()\n    return a\n")
    assert "not allowed" in r.trials[0]["error"]


def test_cpu_limit_and_crash_are_results(tmp_path: Path) -> None:
    r = _run(tmp_path, "    while True:\n        pass\n", limits=Limits(cpu_seconds=1))
    assert r.status == "cpu_limit"
    r = _run(tmp_path, "    os._exit(3)\n")
    assert r.status == "crash" and "status 3" in r.detail


def test_load_error_is_reported(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text("def k(:\n")
    r = run_candidate(f, "k", [TrialJob(0, [np.ones(4, np.float32)], {})])
    assert r.load_error and "SyntaxError" in r.load_error


def test_reading_files_outside_the_sandbox_is_refused(tmp_path: Path) -> None:
    answer = Path(__file__).resolve().parents[2] / "corpus" / "vector_add.py"
    r = _run(tmp_path, f"    open({str(answer)!r}).read()\n    return a\n")
    assert r.trials[0]["status"] == "crash" and "reading" in r.trials[0]["error"]
    r = _run(tmp_path, "    os.listdir('/tmp')\n    return a\n")
    assert "listing" in r.trials[0]["error"]


def test_a_reference_file_runs_sandboxed_too(tmp_path: Path) -> None:
    """A user-supplied reference is profiled in the sandbox: one that misbehaves (writes
    outside, spawns processes) is dropped from the comparison and leaves nothing behind."""
    from migrator.migration import migrate
    from migrator.score import score

    corpus = Path(__file__).resolve().parents[2] / "corpus"
    k = migrate(corpus / "vector_add.cu", out_dir=tmp_path / "gen", check=False).kernels[0]
    good = score(corpus / "vector_add.cu", k.nki_file, seeds=1, reference=k.nki_file)
    assert good.performance.reference == str(k.nki_file)
    assert good.performance.reference_latency_us and good.performance.reference_latency_us > 0
    leak = tmp_path / "leak.txt"
    hostile = tmp_path / "hostile_ref.py"
    hostile.write_text(
        (k.nki_source or "")
        .replace(
            "    N = a.shape[0]\n",
            f"    N = a.shape[0]\n    open({str(leak)!r}, 'w').write('x')\n    os.system('true')\n",
        )
        .replace("import neuronxcc.nki as nki\n", "import os\n\nimport neuronxcc.nki as nki\n")
    )
    assert "os.system" in hostile.read_text() and "import os" in hostile.read_text()
    r = score(corpus / "vector_add.cu", k.nki_file, seeds=1, reference=hostile)
    assert r.verdict == "pass" and r.performance.reference is None and not leak.exists()
