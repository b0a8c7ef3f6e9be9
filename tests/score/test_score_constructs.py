"""Structural fidelity (C2N4046): CUDA math functions and max/min reductions must have an NKI
instruction that can compute them among those the candidate executed."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.cuda.frontend import analyze_file
from migrator.migration import migrate
from migrator.score import score
from migrator.score.fidelity import construct_findings, cuda_constructs
from migrator.score.mutate import make

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def _kernel(stem: str, name: str | None = None):  # noqa: ANN202 - an IR Kernel
    tu = analyze_file(CORPUS / f"{stem}.cu")
    return tu.kernel(name) if name else tu.global_kernels[0]


def test_constructs_come_from_the_dataflow_with_helpers_inlined() -> None:
    assert set(cuda_constructs(_kernel("softmax_row"))) == {"exp", "max reduction"}
    assert set(cuda_constructs(_kernel("gelu"))) == {"tanh"}  # inside the __device__ helper
    assert set(cuda_constructs(_kernel("layernorm"))) == {"rsqrt"}
    assert cuda_constructs(_kernel("vector_add")) == {}


def test_missing_construct_is_reported_with_its_cuda_line() -> None:
    k = _kernel("softmax_row")
    found = construct_findings(k, "softmax_row.cu", {"dma_load", "exp", "tensor_reduce[sum]"})
    assert [f.rule for f in found] == ["C2N4046"]
    assert "max reduction" in found[0].message
    assert found[0].cuda_location is not None
    line = int(found[0].cuda_location.rsplit(":", 1)[1])
    assert "max" in (CORPUS / "softmax_row.cu").read_text().splitlines()[line - 1].lower()
    # every construct present, or a composite that contains it: nothing to report
    assert construct_findings(k, "s.cu", {"exp", "tensor_reduce[max]"}) == []
    assert construct_findings(_kernel("gelu"), "g.cu", {"nisa.activation[gelu_apprx_tanh]"}) == []
    assert [f.rule for f in construct_findings(_kernel("gelu"), "g.cu", {"multiply", "add"})] == [
        "C2N4046"
    ]
    assert construct_findings(k, "s.cu", set()) == []  # no trace: no evidence either way
    # a function no instruction can compute is an error (its values came from elsewhere); a
    # missing max reduction, computed some other way, a warning
    (fn,) = construct_findings(_kernel("gelu"), "g.cu", {"multiply", "add"})
    assert fn.severity == "error" and found[0].severity == "warning"


@pytest.fixture(scope="module")
def softmax(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("softmax")
    k = migrate(CORPUS / "softmax_row.cu", out_dir=tmp, check=False).kernels[0]
    mutant = dict((m.name, src) for m, src in make(k.nki_source))["missing_max_subtraction"]
    (tmp / "no_max.py").write_text(mutant)
    return Path(k.nki_file), tmp / "no_max.py"


def test_scorer_flags_a_dropped_max_and_not_the_reference(softmax: tuple[Path, Path]) -> None:
    reference, no_max = softmax
    r = score(CORPUS / "softmax_row.cu", reference, seeds=1)
    assert r.verdict == "pass" and "C2N4046" not in r.rule_ids()
    r = score(CORPUS / "softmax_row.cu", no_max, seeds=1, nki_name="softmax_row")
    assert r.verdict == "fail" and "C2N4046" in r.rule_ids()
    (f,) = [f for f in r.findings if f.rule == "C2N4046"]
    assert f.cuda_location and f.cuda_location.startswith("softmax_row.cu:")
