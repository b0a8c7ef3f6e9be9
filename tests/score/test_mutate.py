"""The mutation tool: wrong migrations derived from a correct one fail; correct variants pass."""

from __future__ import annotations

import tempfile
from pathlib import Path

from migrator.migration import migrate
from migrator.score.mutate import make, run

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def test_mutations_apply_to_generated_kernels() -> None:
    src = migrate(CORPUS / "matmul_tiled.cu", out_dir=tempfile.mkdtemp(), check=False)
    names = {m.name for m, _ in make(src.kernels[0].nki_source or "")}
    assert {"skip_last_tile", "drop_store_mask", "bf16_accumulation", "swapped_transpose",
            "swapped_operands", "missing_scale"} <= names  # fmt: skip


def test_scorer_kills_every_mutant_and_passes_every_variant() -> None:
    report = run([CORPUS / "vector_add.cu"], seeds=1)
    kinds = {r.kind for r in report.results}
    assert kinds == {"mutant", "variant"}
    assert report.kill_rate == 1.0, [r for r in report.results if not r.expected]
    assert report.variant_pass_rate == 1.0, [r for r in report.results if not r.expected]
