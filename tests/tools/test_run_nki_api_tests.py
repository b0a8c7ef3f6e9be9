"""tools/run_nki_api_tests.py on a fake SDK checkout written here (no published sources in CI)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "run_nki_api_tests", ROOT / "tools" / "run_nki_api_tests.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_nki_api_tests"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("run_nki_api_tests", None)


PASSING = """
import unittest
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit(mode="simulation")
def twice(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(a), 2.0))
    return out


def test_not_a_test(in_tensor):  # a kernel-like helper: unittest does not collect it
    return in_tensor


class TestTwice(unittest.TestCase):
    def test_value(self):
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        self.assertTrue(np.allclose(twice(a), 2 * a))

    def test_wrong_golden(self):
        a = np.ones((2, 4), dtype=np.float32)
        self.assertTrue(np.allclose(twice(a), 3 * a))
"""

BROKEN_IMPORT = """
import neuronxcc.nki.language as nl
x = nl.no_such_api
"""

NO_TESTS = """
import neuronxcc.nki as nki
"""


def write_checkout(root: Path) -> Path:
    folder = root / "general" / "nki" / "test"
    folder.mkdir(parents=True)
    (folder / "test_a_twice.py").write_text(PASSING)
    (folder / "test_b_broken.py").write_text(BROKEN_IMPORT)
    (folder / "test_c_empty.py").write_text(NO_TESTS)
    (folder / "helper.py").write_text("")  # not a test file
    return root


def test_finds_test_files_in_checkout_or_folder(tool, tmp_path):
    root = write_checkout(tmp_path)
    names = [p.name for p in tool.find_test_files(root)]
    assert names == ["test_a_twice.py", "test_b_broken.py", "test_c_empty.py"]
    assert tool.find_test_files(root / "general" / "nki" / "test")[0].name == "test_a_twice.py"


def test_runs_each_file_and_counts(tool, tmp_path, capsys):
    root = write_checkout(tmp_path)
    code = tool.main([str(root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    rows = {r["file"]: r for r in data["files"]}
    twice = rows["test_a_twice.py"]
    assert (twice["passed"], twice["total"], twice["status"]) == (1, 2, "FAIL")
    assert "test_wrong_golden" in twice["failures"][0]
    broken = rows["test_b_broken.py"]
    assert (broken["passed"], broken["total"]) == (0, 1)
    assert "no_such_api" in broken["failures"][0]
    assert rows["test_c_empty.py"]["status"] == "no tests"
    assert data["totals"] == {
        "files_passing": 1,
        "files_without_tests": 1,
        "files": 3,
        "tests_passing": 1,
        "tests": 3,
    }


def test_table_and_only(tool, tmp_path, capsys):
    root = write_checkout(tmp_path)
    code = tool.main([str(root), "--only", "empty"])
    out = capsys.readouterr().out
    assert code == 0
    assert "test_c_empty.py" in out and "test_a_twice.py" not in out
    assert "1/1 files pass, 0/0 tests pass" in out


def test_timeout_is_reported(tool, tmp_path):
    path = tmp_path / "test_slow.py"
    path.write_text("import time\ntime.sleep(30)\n")
    result = tool.run_file(path, timeout=1.0)
    assert result.status == "TIMEOUT" and result.passed == 0
