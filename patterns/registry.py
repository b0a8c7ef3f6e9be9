"""The pattern registry: matchers by family, ordered by priority, extensible by entry points.

A matcher looks at one kernel's IR and returns a `MatchResult`: matched with a family plan and
the reasons it matched, or not matched with the reasons it did not. `classify` asks every matcher
and keeps all verdicts, so a report can say why each family was ruled out. User matchers register
with `register(...)` or through the ``cuda2nki.patterns`` entry-point group (a callable that
returns a matcher), and slot in by priority next to the built-ins.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.diagnostics import Diagnostic

Priority = Literal["takeover", "default", "fallback"]
_PRIORITY_ORDER = {"takeover": 0, "default": 1, "fallback": 2}
ENTRY_POINT_GROUP = "cuda2nki.patterns"


class MatchResult(BaseModel):
    """One matcher's verdict on one kernel."""

    model_config = ConfigDict(frozen=True)

    family: str
    kernel: str
    matched: bool
    variant: str | None = None  # e.g. "softmax", "shared_tiled", "block_partial"
    reasons: list[str] = Field(default_factory=list)  # why it matched, or why not
    plan: dict[str, Any] | None = None  # family-specific structure for the planner/templates
    diagnostics: list[Diagnostic] = Field(default_factory=list)


class Matcher(Protocol):
    family: str
    priority: Priority

    def match(self, tu: TranslationUnit, kernel: Kernel) -> MatchResult: ...


class FamilyMatcher:
    """A convenient base for matchers: `reject` builds the not-matched verdict with its reason."""

    family: str
    priority: Priority = "default"

    def reject(self, k: Kernel, why: str) -> MatchResult:
        return MatchResult(family=self.family, kernel=k.name, matched=False, reasons=[why])

    def accept(
        self, k: Kernel, variant: str | None, reasons: list[str], plan: dict[str, Any]
    ) -> MatchResult:
        return MatchResult(family=self.family, kernel=k.name, matched=True, variant=variant,
                           reasons=reasons, plan=plan)  # fmt: skip


_MATCHERS: list[Matcher] = []
_loaded_entry_points = False


def register(matcher: Matcher) -> Matcher:
    """Add a matcher (built-in or user); a later registration of a family replaces the earlier."""
    for i, m in enumerate(_MATCHERS):
        if m.family == matcher.family and type(m) is type(matcher):
            _MATCHERS[i] = matcher
            return matcher
    _MATCHERS.append(matcher)
    return matcher


def matchers() -> list[Matcher]:
    """All matchers in priority order (takeover, default, fallback; then registration order)."""
    _ensure_loaded()
    return sorted(_MATCHERS, key=lambda m: _PRIORITY_ORDER[m.priority])


def _ensure_loaded() -> None:
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    _loaded_entry_points = True
    from migrator.patterns import builtin  # noqa: F401  (registers the built-in families)

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        factory: Callable[[], Matcher] = ep.load()
        register(factory())


def planner_for(family: str) -> Callable[..., Any] | None:
    """The matcher's `plan(match, tu, kernel, spec) -> Plan`, if its family emits NKI."""
    for m in matchers():
        if m.family == family:
            return getattr(m, "plan", None)
    return None


class Classification(BaseModel):
    """Every matcher's verdict, and the winner (the first match in priority order)."""

    kernel: str
    winner: MatchResult | None
    verdicts: list[MatchResult]

    @property
    def family(self) -> str | None:
        return self.winner.family if self.winner else None


def classify(tu: TranslationUnit, kernel: Kernel) -> Classification:
    verdicts = [m.match(tu, kernel) for m in matchers()]
    winner = next((v for v in verdicts if v.matched), None)
    return Classification(kernel=kernel.name, winner=winner, verdicts=verdicts)
