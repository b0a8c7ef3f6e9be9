"""Every adversarial submission fails, with the rule id its docstring names."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.score import score
from migrator.score.sandbox import Limits

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
ADVERSARIAL = Path(__file__).resolve().parent / "adversarial"


CASES = {
    "numpy_compute.py": {"C2N4020"},
    "plain_function.py": {"C2N4021"},
    "returns_input.py": {"C2N4022"},
    "constant_output.py": {"C2N4023"},
    "leftover_output.py": {"C2N4040"},
    "cache_state.py": {"C2N4024"},
    "mutates_input.py": {"C2N4025"},
    "monkey_patch.py": {"C2N4026", "C2N4027"},
    "hardcoded_shape.py": {"C2N4032", "C2N4031"},
    "swallow_exception.py": {"C2N4030"},
    "sandbox_escape.py": {"C2N4028"},
    "network.py": {"C2N4028", "C2N4004"},
    "hang.py": {"C2N4003"},
    "memory_hog.py": {"C2N4003"},
    "precision_downgrade.py": {"C2N4029"},
    "host_read_tile.py": {"C2N4020"},
    "nl_numpy_alias.py": {"C2N4020"},
}


def test_every_adversarial_file_has_a_case() -> None:
    assert {p.name for p in ADVERSARIAL.glob("*.py")} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_adversarial_submission_fails_with_its_rule(name: str) -> None:
    stem = "softmax_row" if name == "precision_downgrade.py" else "vector_add"
    limits = Limits(cpu_seconds=2, wall_seconds=20) if name == "hang.py" else None
    r = score(CORPUS / f"{stem}.cu", ADVERSARIAL / name, seeds=2, reference=None, limits=limits)
    assert r.verdict == "fail", r.summary
    assert not r.gate_passed
    missing = CASES[name] - r.rule_ids()
    assert not missing, (missing, sorted(r.rule_ids()))
    assert r.score < 50


def test_wall_clock_timeout_is_a_finding() -> None:
    r = score(CORPUS / "vector_add.cu", ADVERSARIAL / "hang.py", seeds=1, reference=None,
              limits=Limits(cpu_seconds=30, wall_seconds=2))  # fmt: skip
    assert "C2N4002" in r.rule_ids() and r.verdict == "fail"


def test_an_endless_loop_stops_at_a_limit_derived_from_the_reference() -> None:
    """Without explicit limits the candidate gets a multiple of the generated reference's run
    time (at least 20 s), not the default two minutes."""
    r = score(CORPUS / "vector_add.cu", ADVERSARIAL / "hang.py", seeds=1)
    assert r.verdict == "fail" and r.rule_ids() & {"C2N4002", "C2N4003"}
    assert r.sandbox.limits["wall_seconds"] < 60 and r.timing.candidate_s < 60
