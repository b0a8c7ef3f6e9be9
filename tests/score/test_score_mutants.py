"""Wrong migrations fail: small mutations of generated kernels (the bugs the issue lists)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.score import score

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


# (corpus stem, what, [(old, new)], rule ids of which at least one must be reported)
MUTANTS = [
    ("vector_add", "dropped mask", [(", mask=in_bounds)", ")")], {"C2N4005", "C2N4040"}),
    ("vector_add", "skipped last tile",
     [("nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE))",
       "nl.affine_range(N // (P_TILE * F_TILE))")], {"C2N4040"}),
    ("layernorm", "missing epsilon",
     [("nl.rsqrt(nl.add(mean_var[:, 1:2], eps))", "nl.rsqrt(mean_var[:, 1:2])")],
     {"C2N4042"}),
    ("softmax_row", "no max subtraction",
     [("shifted = nl.subtract(x_tile, row_max)", "shifted = x_tile")], {"C2N4044"}),
    ("softmax_row", "bf16 accumulation",
     [("row_sum = nl.sum(exps, axis=1)", "row_sum = nl.sum(exps, axis=1, dtype=nl.bfloat16)")],
     {"C2N4029"}),
    ("matmul_tiled", "skipped last K tile",
     [("nl.affine_range((K + tk - 1) // tk)", "nl.affine_range(K // tk)")],
     {"C2N4010"}),
    ("matmul_tiled", "missing beta",
     [("res = nl.add(res, nl.multiply(c_tile, beta))", "res = nl.add(res, c_tile)")],
     {"C2N4042"}),
    ("reduce_warp_shuffle", "off-by-one row length",
     [("i_f = nl.arange(C)[None, :]", "i_f = nl.arange(C - 1)[None, :]")], {"C2N4010"}),
]  # fmt: skip


@pytest.mark.parametrize(("stem", "what", "edits", "rules"), MUTANTS, ids=[m[1] for m in MUTANTS])
def test_mutant_fails(stem: str, what: str, edits, rules, generated, tmp_path: Path) -> None:
    path, name = generated(stem)
    text = path.read_text()
    for old, new in edits:
        assert old in text, f"the generated kernel changed; update the mutant {what!r}"
        text = text.replace(old, new)
    mutant = tmp_path / path.name
    mutant.write_text(text)
    r = score(CORPUS / f"{stem}.cu", mutant, nki_name=name, seeds=2, reference=None)
    assert r.verdict == "fail", r.summary
    assert r.rule_ids() & rules, sorted(r.rule_ids())
    if what == "missing epsilon":  # the finding points at the CUDA line that uses eps
        hit = next(f for f in r.findings if f.rule == "C2N4042")
        assert hit.cuda_location and "+ eps" in _line(hit.cuda_location)


def test_slow_but_correct_variant_gets_performance_findings(generated, tmp_path: Path) -> None:
    path, name = generated("vector_add")
    slow = tmp_path / path.name
    slow.write_text(path.read_text().replace("P_TILE = 128", "P_TILE = 4"))
    r = score(CORPUS / "vector_add.cu", slow, nki_name=name, seeds=1)
    assert {"C2N4050", "C2N4053"} <= r.rule_ids()
    assert r.verdict == "pass" and r.score < 95  # correct, but it costs performance points
    assert r.performance.ratio_to_reference and r.performance.ratio_to_reference > 2
    hit = next(f for f in r.findings if f.rule == "C2N4050")
    assert hit.nki_location and hit.nki_location.startswith(str(slow))


def _line(location: str) -> str:
    path, line = location.rsplit(":", 1)
    return Path(path).read_text().splitlines()[int(line) - 1]
