"""Run the NKI SDK's per-API example test files, unmodified, under the cuda2nki emulator.

Usage::

    .venv/bin/python tools/run_nki_api_tests.py CHECKOUT [--json] [--only TEXT]
        [--timeout SECONDS] [--verbose]

CHECKOUT is a checkout (or ``git archive``) of aws-neuron/aws-neuron-sdk at tag v2.26.0, or
directly its ``general/nki/test`` folder: some 42 ``test_*.py`` files, one per public API, each
a ``unittest`` module that imports ``neuronxcc.nki``, runs its example kernels with numpy
inputs and compares the results with numpy goldens. Every file runs in its own subprocess
(so one hanging or crashing file cannot take the others down) with the unittest loader (as the
files are written; pytest would also collect a kernel named ``test_nl_broadcast`` as a test),
the emulator's import shim (``migrator.nki.simulate``) installed before the file is imported,
and default emulator options (``--precision fp32`` holds bf16/fp8 tiles in fp32 as AWS's
simulators do, for comparison). numpy's global generator is seeded with 0 before each file, so
runs are reproducible: ``test_nki_isa_dropout.py`` draws its drop probabilities unseeded from
[0, 100), and with real dropout (a probability of 1 or more drops everything) it fails
whenever no partition draws one below 1, about 28 % of unseeded runs; the emulator's own
generator is seeded by ``EmulatorOptions.seed``. A file that fails to import counts as one
failing test (``<import>``). The tool prints one row per file (tests passed / run, first
failure) and totals: files passing (it imports and every test passes; one published file
defines kernels but no tests, shown as ``no tests``) and tests passing.

This tool needs the published sources, so it is not part of the test suite; its helpers are
unit-tested in ``tests/tools/test_run_nki_api_tests.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PASSING = ("pass", "no tests")
TEST_DIR = "general/nki/test"

# Runs in the child: install the shim, import one file, run its unittest tests, write each
# test's outcome (and the last line of its failure) as JSON to the path given.
CHILD = r"""
import importlib.util, json, sys, traceback, unittest
import numpy as np
import migrator.nki as mn

np.random.seed(0)  # reproducible runs: some files draw inputs from numpy's global generator

path, out, precision = sys.argv[1], sys.argv[2], sys.argv[3]
rows = []

def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return (lines[-1] if lines else "")[:300]

class Result(unittest.TestResult):
    def addSuccess(self, test):
        rows.append({"test": test.id(), "outcome": "passed", "message": ""})
    def addFailure(self, test, err):
        rows.append({"test": test.id(), "outcome": "failed",
                     "message": last_line(self._exc_info_to_string(err, test))})
    addError = addFailure
    def addSkip(self, test, reason):
        rows.append({"test": test.id(), "outcome": "skipped", "message": reason})

with mn.simulate(options=mn.EmulatorOptions(precision=precision)):
    try:
        spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    except BaseException:
        rows.append({"test": "<import>", "outcome": "failed",
                     "message": last_line(traceback.format_exc())})
    else:
        unittest.defaultTestLoader.loadTestsFromModule(module).run(Result())
with open(out, "w") as fh:
    json.dump({"rows": rows}, fh)
"""


@dataclass
class FileResult:
    """One table row: a test file and its tests' outcomes."""

    file: str
    passed: int = 0
    total: int = 0
    status: str = "pass"  # "pass", "no tests", "FAIL", "TIMEOUT", "CRASH"
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    detail: str = ""


def find_test_files(checkout: Path) -> list[Path]:
    """The ``test_*.py`` files of the SDK's API example folder in ``checkout``."""
    folder = checkout / TEST_DIR if (checkout / TEST_DIR).is_dir() else checkout
    return sorted(folder.glob("test_*.py"))


def summarise(name: str, rows: list[dict], seconds: float) -> FileResult:
    """Fold one file's per-test report rows into a table row."""
    result = FileResult(name, seconds=round(seconds, 2))
    outcome: dict[str, str] = {}
    for row in rows:
        test = row["test"].rsplit(".", 2)[-2:] if row["test"] != "<import>" else [row["test"]]
        test = ".".join(test)
        if row["outcome"] == "failed" or test not in outcome:
            outcome[test] = row["outcome"]
        if row["outcome"] == "failed" and row.get("message"):
            result.failures.append(f"{test}: {row['message']}")
    counted = {t: o for t, o in outcome.items() if o != "skipped"}
    result.total = len(counted)
    result.passed = sum(o == "passed" for o in counted.values())
    if result.passed < result.total:
        result.status = "FAIL"
    elif result.total == 0:
        result.status = "no tests"
    return result


def run_file(path: Path, timeout: float, precision: str = "hardware") -> FileResult:
    """Run one test file in a subprocess with the emulator shim installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        try:
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, str(path), str(out), precision],
                cwd=path.parent,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            seconds = time.perf_counter() - start
            return FileResult(path.name, status="TIMEOUT", seconds=round(seconds, 2))
        seconds = time.perf_counter() - start
        if not out.exists():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:]
            return FileResult(
                path.name,
                status="CRASH",
                seconds=round(seconds, 2),
                failures=tail,
                detail=proc.stdout + proc.stderr,
            )
        data = json.loads(out.read_text())
    result = summarise(path.name, data["rows"], seconds)
    result.detail = proc.stdout
    return result


def format_table(results: Sequence[FileResult]) -> str:
    """A plain-text table, one row per file."""
    lines = [f"{'file':<40} {'tests':>7} {'status':<7} {'s':>6}  first failure"]
    for r in results:
        first = r.failures[0] if r.failures else ""
        tests = f"{r.passed}/{r.total}"
        lines.append(f"{r.file:<40} {tests:>7} {r.status:<7} {r.seconds:>6.1f}  {first[:110]}")
    return "\n".join(lines)


def totals(results: Sequence[FileResult]) -> dict[str, int]:
    """Files passing (all their tests pass) and tests passing."""
    return {
        "files_passing": sum(r.status in PASSING for r in results),
        "files_without_tests": sum(r.status == "no tests" for r in results),
        "files": len(results),
        "tests_passing": sum(r.passed for r in results),
        "tests": sum(r.total for r in results),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="aws-neuron-sdk v2.26.0 checkout")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--only", action="append", default=[], help="run files whose name contains this text"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per file")
    parser.add_argument(
        "--precision",
        choices=("hardware", "fp32"),
        default="hardware",
        help="EmulatorOptions.precision (fp32: bf16/fp8 tiles held in fp32, as AWS's simulators)",
    )
    parser.add_argument("--verbose", action="store_true", help="print the output of failing files")
    args = parser.parse_args(argv)
    files = find_test_files(args.checkout.resolve())
    if not files:
        parser.error(f"no test_*.py files under {args.checkout} or its {TEST_DIR}")
    chosen = [f for f in files if not args.only or any(s in f.name for s in args.only)]
    results = [run_file(f, args.timeout, args.precision) for f in chosen]
    summary = totals(results)
    if args.json:
        rows = [{k: v for k, v in asdict(r).items() if k != "detail"} for r in results]
        print(json.dumps({"totals": summary, "files": rows}, indent=2))
    else:
        print(format_table(results))
        print(
            f"\n{summary['files_passing']}/{summary['files']} files pass, "
            f"{summary['tests_passing']}/{summary['tests']} tests pass"
            f" ({summary['files_without_tests']} file(s) without tests)"
        )
    if args.verbose:
        for r in results:
            if r.status not in PASSING:
                print(f"\n--- {r.file}\n{r.detail}", file=sys.stderr)
    return 0 if summary["files_passing"] == summary["files"] else 1


if __name__ == "__main__":
    sys.exit(main())
