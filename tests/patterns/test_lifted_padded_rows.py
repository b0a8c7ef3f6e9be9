"""Rows of width V stored at a stride P >= V (llm.c pads its vocabulary to a multiple of 64):
the row program reduces and stores the first V columns of each P-wide row, leaves the rest as
the original does, and takes V by keyword, since no tensor's shape carries it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.contract import TaskSpec
from migrator.migration import migrate
from migrator.score.defences import scan_source

KERNEL = Path(__file__).resolve().parents[1] / "data" / "softmax_padded.cu"
SPEC = """
    relations = ["P >= V"]
    [kernel]
    name = "softmax_padded"
    [sizes]
    N = 40
    V = 50
    P = 64
    [[size_sets]]
    N = 7
    V = 300
    P = 320
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["N", "P"]
    [[tensors]]
    name = "out"
    role = "out"
    shape = ["N", "P"]
    [[scalars]]
    name = "N"
    size = "N"
    [[scalars]]
    name = "V"
    size = "V"
    [[scalars]]
    name = "P"
    size = "P"
    [launch]
    grid = ["(N + 31) / 32"]
    block = [32]
"""


def _task(tmp_path: Path, spec: str = SPEC) -> Path:
    (tmp_path / "softmax_padded.cu").write_text(KERNEL.read_text())
    (tmp_path / "softmax_padded.toml").write_text(textwrap.dedent(spec))
    return tmp_path / "softmax_padded.cu"


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_padded_rows_reduce_and_store_their_first_v_columns(tmp_path: Path, api: str) -> None:
    (k,) = migrate(_task(tmp_path), out_dir=tmp_path / api, nki_api=api).kernels
    assert (k.family, k.status) == ("rows", "complete"), k.diagnostics
    assert k.check is not None and k.check.ok
    src = k.nki_source or ""
    assert "def softmax_padded(x, *, V):" in src  # V: in no shape, so passed by keyword
    # the columns past V are the original's to leave: not compared, and said so
    assert any(d.id == "C2N2015" for d in k.diagnostics)


def test_without_the_relation_padded_rows_are_not_emitted(tmp_path: Path) -> None:
    """Rows wider than the reduction with nothing saying P >= V: a reduction over part of a
    row is not guessed to be the row."""
    (k,) = migrate(_task(tmp_path, SPEC.replace('relations = ["P >= V"]', "")),
                   out_dir=tmp_path / "out").kernels  # fmt: skip
    assert k.status != "complete" or k.family != "rows"


def test_a_size_no_shape_carries_is_a_keyword_of_the_contract() -> None:
    spec = TaskSpec.model_validate({
        "kernel": {"name": "k"}, "sizes": {"N": 4, "V": 5, "P": 8},
        "tensors": [{"name": "x", "role": "in", "shape": ["N", "P"]},
                    {"name": "y", "role": "out", "shape": ["N", "P"]}],
        "scalars": [{"name": "N", "size": "N"}, {"name": "vocab", "size": "V"},
                    {"name": "eps", "value": 0.5}],
        "launch": {"grid": ["N"], "block": [32]},
    })  # fmt: skip
    assert [s.name for s in spec.passed_sizes] == ["vocab"]
    assert spec.nki_kwargs() == {"eps": 0.5, "vocab": 5}
    assert spec.nki_kwargs({"N": 3, "V": 9, "P": 16}) == {"eps": 0.5, "vocab": 9}


def test_a_submission_without_the_passed_size_is_told_so(tmp_path: Path) -> None:
    sub = tmp_path / "sub.py"
    sub.write_text("import neuronxcc.nki as nki\n\n\n@nki.jit\ndef softmax_padded(x):\n"
                   "    return x\n")  # fmt: skip
    from migrator.contract import load_spec

    _task(tmp_path)
    spec = load_spec(tmp_path / "softmax_padded.toml")
    found = [f for f in scan_source(sub, spec, "softmax_padded") if f.rule == "C2N4043"]
    assert found and "'V'" in found[0].message and "no input's shape" in found[0].message
