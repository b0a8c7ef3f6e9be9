"""The hand-written expert NKI references in corpus/expert/ pass the same check as ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.check import check_kernel
from migrator.contract import load_spec

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
EXPERTS = [
    ("matmul_tiled", "sgemm_tiled_expert.py", "sgemm_tiled"),
    ("softmax_row", "softmax_row_expert.py", "softmax_row"),
    ("layernorm", "layernorm_expert.py", "layernorm"),
]


@pytest.mark.parametrize(("stem", "file", "name"), EXPERTS)
def test_expert_reference_matches_cuda(stem: str, file: str, name: str) -> None:
    report = check_kernel(CORPUS / "expert" / file, load_spec(CORPUS / f"{stem}.toml"), name)
    assert report.ok, [(s.sizes, s.error, [o for o in s.outputs if not o.ok]) for s in report.sizes]
    assert report.estimate_us is not None and report.estimate_us > 0
