"""Sanitizer-grade findings and errors, always with kernel, block, thread and source line.

Findings (uninitialised shared or local reads, shared-memory races, warp masks naming inactive
lanes, out-of-bounds accesses in `oob="report"` mode) are values collected in the run and
returned, so one run can report many problems. Errors (out-of-bounds in `oob="raise"` mode, a
barrier not reached by every live thread, unsupported constructs) stop the run and carry the
same coordinates. Repeats of one kind at one source line are reported once (with a count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from migrator.diagnostics import Diagnostic, Span, make

FindingKind = Literal[
    "out_of_bounds",
    "uninitialized_read",
    "shared_race",
    "warp_mask",
    "misaligned",
]


# Each finding kind is a row of the C2N registry (migrator/diagnostics.py).
FINDING_IDS: dict[str, str] = {
    "out_of_bounds": "C2N1501",
    "uninitialized_read": "C2N1502",
    "shared_race": "C2N1503",
    "warp_mask": "C2N1504",
    "misaligned": "C2N1505",
}


@dataclass(frozen=True)
class Coord:
    """Where in the launch something happened: block and thread indices (x, y, z)."""

    block: tuple[int, int, int]
    thread: tuple[int, int, int]

    def __str__(self) -> str:
        return f"block {self.block} thread {self.thread}"


@dataclass
class Finding:
    """One reported problem. `count` says how many lanes/accesses hit it at this line."""

    kind: FindingKind
    message: str
    kernel: str
    span: Span | None = None
    coords: list[Coord] = field(default_factory=list)
    count: int = 1

    def diagnostic(self) -> Diagnostic:
        """This finding as a C2N diagnostic (for reports)."""
        more = f" ({self.count} occurrences)" if self.count > 1 else ""
        return make(FINDING_IDS[self.kind], self.span, detail=f"{self.message}{more}")

    def render(self) -> str:
        where = f"{self.span}: " if self.span else ""
        more = f" ({self.count} occurrences)" if self.count > 1 else ""
        return f"{where}{self.kind}: {self.message}{more}"


class InterpError(Exception):
    """The kernel did something the interpreter must not continue past (or cannot run)."""

    def __init__(self, message: str, span: Span | None = None, kernel: str = "") -> None:
        self.span = span
        self.kernel = kernel
        where = f"{span}: " if span else ""
        who = f"in kernel {kernel}: " if kernel else ""
        super().__init__(f"{where}{who}{message}")


class OutOfBoundsError(InterpError):
    """A global/shared/local access outside its buffer (compute-sanitizer memcheck)."""


class BarrierError(InterpError):
    """`__syncthreads()` reached by only part of a block's live threads (synccheck)."""


class LaunchError(InterpError):
    """The launch itself is wrong (missing/unknown argument, dtype, block size, no kernel)."""


class UnsupportedError(InterpError):
    """A construct the interpreter does not implement; raised at once, never guessed."""


BUDGET_PHRASE = "exceeds its budget of"  # (in every BudgetError's message)


class BudgetError(UnsupportedError):
    """The run took more thread-statements than its options allow (`max_thread_statements`):
    a run of the original at sizes too costly for what it was made for (a trace, a probe)."""


@dataclass
class FindingLog:
    """Collects findings, merging repeats of (kind, line, detail key)."""

    kernel: str
    items: list[Finding] = field(default_factory=list)
    _index: dict[tuple[str, str, str], Finding] = field(default_factory=dict)

    def add(
        self,
        kind: FindingKind,
        message: str,
        span: Span | None,
        coords: list[Coord],
        count: int = 1,
        key: str = "",
    ) -> None:
        k = (kind, str(span), key)
        prev = self._index.get(k)
        if prev is not None:
            prev.count += count
            return
        f = Finding(kind, message, self.kernel, span, coords[:4], count)
        self._index[k] = f
        self.items.append(f)
