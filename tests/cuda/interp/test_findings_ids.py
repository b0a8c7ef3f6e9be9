"""Interpreter findings are rows of the C2N diagnostics registry."""

from __future__ import annotations

from typing import get_args

from migrator.cuda.interp.findings import FINDING_IDS, Finding, FindingKind
from migrator.diagnostics import REGISTRY, Span


def test_every_finding_kind_has_a_registry_row() -> None:
    assert set(FINDING_IDS) == set(get_args(FindingKind))
    for kind, fid in FINDING_IDS.items():
        assert fid in REGISTRY, kind
        f = Finding(kind=kind, message="m", kernel="k", span=Span(file="k.cu", line=3, col=1),
                    count=2)  # fmt: skip
        d = f.diagnostic()
        assert d.id == fid and "m (2 occurrences)" in d.message and d.span == f.span
