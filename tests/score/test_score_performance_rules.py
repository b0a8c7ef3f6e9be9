"""Performance rules fire on correct but slow code: a transposed (strided) access pattern that
makes every DMA descriptor one element long (C2N4051 SMALL_DMA, C2N4053 SLOWER_THAN_REFERENCE)."""

from __future__ import annotations

from pathlib import Path

from migrator.migration import migrate
from migrator.score import score

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
TILED = "idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f"
STRIDED = "idx = t * (P_TILE * F_TILE) + i_f * P_TILE + i_p"  # partition = the fast axis


def test_strided_dma_is_correct_but_flagged(tmp_path: Path) -> None:
    k = migrate(CORPUS / "vector_add.cu", out_dir=tmp_path, check=False).kernels[0]
    assert TILED in k.nki_source, "the generated vector_add changed: update this test's rewrite"
    strided = tmp_path / "strided.py"
    strided.write_text(k.nki_source.replace(TILED, STRIDED))
    reference = score(CORPUS / "vector_add.cu", k.nki_file, seeds=1)
    assert "C2N4051" not in reference.rule_ids()
    r = score(CORPUS / "vector_add.cu", strided, seeds=1, nki_name="vector_add")
    assert r.verdict == "pass"  # the numbers are right: only the speed is judged
    assert {"C2N4051", "C2N4053"} <= r.rule_ids()
    (small,) = [f for f in r.findings if f.rule == "C2N4051"]
    assert small.nki_location and "4 bytes per descriptor" in small.message
    line = int(small.nki_location.rsplit(":", 1)[1])
    assert "nl.load" in strided.read_text().splitlines()[line - 1]
    assert r.score < reference.score
