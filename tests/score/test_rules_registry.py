"""The scorer's rule table and the C2N registry agree row for row."""

from __future__ import annotations

from migrator.diagnostics import REGISTRY
from migrator.score.rules import RULES


def test_every_rule_is_a_registry_row() -> None:
    for rule in RULES.values():
        row = REGISTRY[rule.id]
        assert (row.name, row.severity) == (rule.name, rule.severity)
