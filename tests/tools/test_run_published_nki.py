"""Helpers of tools/run_published_nki.py, exercised on a fake checkout written here.

The real published kernels are not needed (no network in CI): one case is pointed at a file
this test writes, in the layout the tool expects.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "run_published_nki", ROOT / "tools" / "run_published_nki.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_published_nki"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("run_published_nki", None)


ADD_KERNEL = """
from neuronxcc import nki
import neuronxcc.nki.language as nl


@nki.jit
def nki_tensor_add_kernel(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(x), nl.load(y)))
    return out
"""


def _checkout(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "general" / "nki" / "examples" / "getting_started_baremetal.py"
    path.parent.mkdir(parents=True)
    path.write_text(body)
    return tmp_path


def test_find_file_prefers_candidate_order_then_root_order(tool, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "x").mkdir(parents=True)
    (b / "y").mkdir(parents=True)
    (a / "x" / "k.py").write_text("")
    (b / "y" / "k.py").write_text("")
    assert tool.find_file([a, b], ["y/k.py", "x/k.py"]) == b / "y" / "k.py"
    assert tool.find_file([a, b], ["z/k.py"]) is None


def test_max_error_and_allclose_handle_tuples_and_shapes(tool):
    a = np.array([1.0, 2.0], np.float32)
    assert tool.max_error((a, a + 1), (a, a + 1.5)) == pytest.approx(0.5)
    assert tool.allclose((a,), (a + 1e-7,), atol=1e-6, rtol=0)
    assert not tool.allclose(a, a[:1], atol=1, rtol=1)
    with pytest.raises(ValueError, match="shape"):
        tool.max_error(a, a[:1])
    assert tool.max_error(np.array([np.nan]), np.array([1.0])) == float("inf")


def test_placeholder_modules_are_scoped_and_fail_when_called(tool):
    name = "cuda2nki_not_a_real_package.sub"
    with tool.placeholder_modules([name, "json"]) as added:
        assert added == [name]  # installed packages are left alone
        from cuda2nki_not_a_real_package.sub import softmax  # noqa: PLC0415

        with pytest.raises(ImportError, match="placeholder"):
            softmax([1.0])
    assert name not in sys.modules and "cuda2nki_not_a_real_package" not in sys.modules


def test_run_case_on_a_fake_checkout(tool, tmp_path):
    root = _checkout(tmp_path, ADD_KERNEL)
    result = tool.run_case(tool.CASES[0], [root])
    assert (result.status, result.max_error) == ("match", 0.0)
    assert result.file.endswith("getting_started_baremetal.py")


def test_run_case_reports_mismatch_error_and_missing(tool, tmp_path):
    wrong = _checkout(tmp_path / "w", ADD_KERNEL.replace("nl.add", "nl.subtract"))
    assert tool.run_case(tool.CASES[0], [wrong]).status == "MISMATCH"
    broken = _checkout(tmp_path / "b", ADD_KERNEL.replace("nl.add(", "nl.no_such_op("))
    result = tool.run_case(tool.CASES[0], [broken])
    assert result.status == "ERROR" and "no_such_op" in result.notes
    assert tool.run_case(tool.CASES[0], [tmp_path / "empty"]).status == "missing"


def test_main_prints_json_and_table(tool, tmp_path, capsys):
    root = _checkout(tmp_path, ADD_KERNEL)
    assert tool.main([str(root), "--json", "--only", "getting_started"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["status"] == "match" and "detail" not in rows[0]
    assert tool.main([str(root), "--only", "getting_started"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| kernel | file | status |") and "1/1 published kernels" in table


def test_every_case_names_a_reference_and_inputs(tool):
    names = [c.name for c in tool.CASES]
    assert len(names) == len(set(names)) >= 12
    for case in tool.CASES:
        args, kwargs = case.inputs(np.random.default_rng(0))
        assert isinstance(args, tuple) and isinstance(kwargs, dict)
        assert callable(case.reference)
