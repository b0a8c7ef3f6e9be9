"""Correct migrations pass: the generated reference and the hand-written experts score >= 90."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.score import score

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


GENERATED = ["vector_add", "softmax_row", "matmul_tiled", "layernorm", "reduce_warp_shuffle",
             "stencil_1d"]  # fmt: skip
EXPERTS = [
    ("matmul_tiled", "sgemm_tiled_expert.py"),
    ("softmax_row", "softmax_row_expert.py"),
    ("layernorm", "layernorm_expert.py"),
]


@pytest.mark.parametrize("stem", GENERATED)
def test_generated_reference_passes(stem: str, generated) -> None:
    path, name = generated(stem)
    r = score(CORPUS / f"{stem}.cu", path, nki_name=name)
    bad = [(f.rule, f.message) for f in r.findings if f.severity != "note"]
    assert r.verdict == "pass" and r.score >= 90, (r.summary, bad)
    assert r.gate_passed and r.numerics is not None and r.numerics.passed == r.numerics.trials
    assert r.numerics.trials >= 25
    assert any(t.hidden and t.ragged for t in r.trials)
    assert {t.distribution for t in r.trials} >= {"normal", "near_overflow", "near_underflow"}


@pytest.mark.parametrize(("stem", "file"), EXPERTS)
def test_expert_reference_passes(stem: str, file: str) -> None:
    r = score(CORPUS / f"{stem}.cu", CORPUS / "expert" / file)
    assert r.verdict == "pass" and r.score >= 90, (r.summary, [f.message for f in r.findings])
    assert r.performance.reference == "generated"
    assert r.performance.ratio_to_reference is not None
