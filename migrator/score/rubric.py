"""The rubric: five weighted categories -> a 0-100 score and a verdict.

| category | weight | fraction of its points |
|---|---|---|
| correctness gate | 40 | trials passed / trials run; 0 with any integrity error |
| construct fidelity | 20 | (1 - sum of penalties of fidelity findings) * c |
| hardware-constraint compliance | 15 | (1 - sum of penalties of hardware findings) * c |
| performance quality | 15 | (min(1, t_reference / t_candidate) ** 0.5 - penalties) * c |
| maintainability | 10 | (1 - sum of penalties of maintainability findings) * c |

c is the correctness fraction: a kernel that computes nothing right has no fidelity,
compliance or performance worth points.

Penalties count each rule once per category: error 1.0, warning 0.25, note 0 (advice only).
The gate passes when every trial with an oracle passed, at least one trial ran, and there is no
error in the correctness or integrity categories. Verdict "pass" needs the gate, no error
finding anywhere, and a score >= PASS_SCORE; a failed gate caps the score at GATE_CAP so a
failing migration never looks good. Verdict "error" means the scorer could not grade (no trial
had an oracle).
"""

from __future__ import annotations

from migrator.score.models import CategoryScore, Finding, Performance, Trial, Verdict
from migrator.score.rules import PENALTY

WEIGHTS = {
    "correctness": 40.0,
    "fidelity": 20.0,
    "hardware": 15.0,
    "performance": 15.0,
    "maintainability": 10.0,
}
PASS_SCORE = 70.0
GATE_CAP = 49.0


def _penalty(findings: list[Finding], category: str) -> float:
    worst: dict[str, float] = {}
    for f in findings:
        if f.category == category:
            worst[f.rule] = max(worst.get(f.rule, 0.0), PENALTY[f.severity])
    return sum(worst.values())


def grade(
    trials: list[Trial], findings: list[Finding], perf: Performance
) -> tuple[list[CategoryScore], float, bool, Verdict]:
    ran = [t for t in trials if t.status != "no_oracle"]
    passed = sum(t.status == "ok" for t in ran)
    errors = [f for f in findings if f.severity == "error"]
    integrity = any(f.category == "integrity" for f in errors)
    gate = (
        bool(ran)
        and passed == len(ran)
        and not any(f.category in ("correctness", "integrity") for f in errors)
    )
    c = 0.0 if integrity or not ran else passed / len(ran)
    fractions = {"correctness": c}
    for cat in ("fidelity", "hardware", "maintainability"):
        fractions[cat] = max(0.0, 1.0 - _penalty(findings, cat)) * c
    speed = 1.0
    if perf.ratio_to_reference is not None and perf.ratio_to_reference > 0:
        speed = min(1.0, 1.0 / perf.ratio_to_reference) ** 0.5
    perf_pen = _penalty([f for f in findings if f.rule != "C2N4053"], "performance")
    fractions["performance"] = max(0.0, speed - perf_pen) * c
    cats = [
        CategoryScore(
            name=name,
            weight=w,
            fraction=round(fractions[name], 4),
            points=round(w * fractions[name], 2),
            findings=sum(f.category == name for f in findings),
        )
        for name, w in WEIGHTS.items()
    ]
    score = round(sum(c.points for c in cats), 1)
    if not gate:
        score = min(score, GATE_CAP)
    verdict: Verdict
    if not ran:
        verdict = "error"
    elif gate and not errors and score >= PASS_SCORE:
        verdict = "pass"
    else:
        verdict = "fail"
    return cats, score, gate, verdict
