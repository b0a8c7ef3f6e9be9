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


def test_single_buffer_serialises_engines_and_is_flagged(tmp_path: Path) -> None:
    """One SBUF buffer reused by load, compute and store makes every iteration wait for the
    previous store (WAR): DMA and VectorE run one after another (C2N4058)."""
    # hardswish: a chain of VectorE ops long enough for the schedule to matter
    k = migrate(CORPUS / "hardswish.cu", out_dir=tmp_path, check=False).kernels[0]
    src = k.nki_source
    loop = "    for t in nl.affine_range("
    assert loop in src and "x_tile = nl.load(x[idx], mask=in_bounds)" in src, "update the rewrite"
    head = src[: src.index(loop)]
    math = src[src.index("value=", src.index("nl.store(y_out[idx]")) + len("value=") :]
    math = math[: math.rindex(", mask=in_bounds)")].replace("x_tile", "buf")
    serial = tmp_path / "serial.py"
    serial.write_text(
        head
        + "    buf = nl.ndarray((P_TILE, F_TILE), dtype=nl.float32, buffer=nl.sbuf)\n"
        + loop.replace("affine_range", "sequential_range")
        + "(N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):\n"
        + "        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f\n"
        + "        in_bounds = idx < N\n"
        + "        buf[...] = nl.load(x[idx], mask=in_bounds)\n"
        + f"        buf[...] = {math}\n"
        + "        nl.store(y_out[idx], value=buf, mask=in_bounds)\n"
        + "    return y_out\n"
    )
    reference = score(CORPUS / "hardswish.cu", k.nki_file, seeds=1)
    assert "C2N4058" not in reference.rule_ids()
    r = score(CORPUS / "hardswish.cu", serial, seeds=1, nki_name="hardswish")
    assert r.verdict == "pass", r.summary  # correct numbers; only the schedule is judged
    (f,) = [f for f in r.findings if f.rule == "C2N4058"]
    assert "engines overlap 0 %" in f.message and "reference overlaps" in f.message
    assert r.performance.estimated_latency_us > r.performance.reference_latency_us
