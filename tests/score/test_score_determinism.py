"""Identical reports on repeated runs with the same seed (timing excluded); seeds matter."""

from __future__ import annotations

from pathlib import Path

from migrator.score import score
from migrator.score.report import render_json

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def test_same_seed_same_report(generated) -> None:
    path, name = generated("softmax_row")
    a = score(CORPUS / "softmax_row.cu", path, nki_name=name, seed=3, seeds=2)
    b = score(CORPUS / "softmax_row.cu", path, nki_name=name, seed=3, seeds=2)
    assert render_json(a, timing=False) == render_json(b, timing=False)
    c = score(CORPUS / "softmax_row.cu", path, nki_name=name, seed=4, seeds=2)
    assert [t.seed for t in c.trials] != [t.seed for t in a.trials]
    assert render_json(c, timing=False) != render_json(a, timing=False)
