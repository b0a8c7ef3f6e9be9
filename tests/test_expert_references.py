"""The hand-written expert NKI references in corpus/expert/ pass the same check as ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.check import check_kernel
from migrator.contract import load_spec

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _experts() -> list[tuple[str, str, str]]:
    """(corpus stem, expert file, NKI name) for every expert, found by the kernel's name."""
    by_base = {load_spec(t).kernel.name.removesuffix("_kernel"): t.stem
               for t in CORPUS.glob("*.toml")}  # fmt: skip
    out = []
    for f in sorted((CORPUS / "expert").glob("*_expert.py")):
        base = f.name.removesuffix("_expert.py")
        assert base in by_base, f"{f.name}: no corpus kernel named {base}_kernel"
        out.append((by_base[base], f.name, base))
    return out


EXPERTS = _experts()


def test_experts_cover_the_families() -> None:
    assert len(EXPERTS) >= 10


@pytest.mark.parametrize(("stem", "file", "name"), EXPERTS)
def test_expert_reference_matches_cuda(stem: str, file: str, name: str) -> None:
    report = check_kernel(CORPUS / "expert" / file, load_spec(CORPUS / f"{stem}.toml"), name)
    assert report.ok, [(s.sizes, s.error, [o for o in s.outputs if not o.ok]) for s in report.sizes]
    assert report.estimate_us is not None and report.estimate_us > 0
