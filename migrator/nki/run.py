"""Per-run state: options, grid position, live on-chip memory, affine loops, trace, findings.

A ``Run`` is created for each kernel launch and made current with ``Run.activate()``. The
current run lives in a ``ContextVar`` that is always reset in a ``finally``, so an exception
leaves nothing behind (house rule 6) and concurrent threads do not see each other's runs.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .dtypes import name as dtype_name
from .errors import (
    UNKNOWN_LOCATION,
    Finding,
    NkiConstraintError,
    SourceLocation,
    kernel_location,
)
from .hardware import TARGETS, Hardware
from .options import EmulatorOptions
from .trace import Engine, Instr

_CURRENT: ContextVar[Run | None] = ContextVar("cuda2nki_nki_run", default=None)


def current_run() -> Run:
    """The run of the kernel being executed; NKI calls outside a kernel launch are errors."""
    run = _CURRENT.get()
    if run is None:
        raise NkiConstraintError(
            "err_outside_kernel",
            "NKI language/ISA calls must run inside a kernel launched through nki.jit, "
            "simulate_kernel or migrator.nki.run_kernel",
        )
    return run


def maybe_current_run() -> Run | None:
    """The current run or None (used where a call may legitimately happen outside a kernel)."""
    return _CURRENT.get()


@dataclass(slots=True)
class AffineFrame:
    """One active ``affine_range`` loop: its unique instance id and current iteration."""

    instance: int
    iteration: int = 0

    @property
    def key(self) -> int:
        """Packed (instance, iteration) used in per-element writer stamps."""
        return (self.instance << 24) | self.iteration


@dataclass
class Run:
    """Everything one kernel launch owns. Nothing here is shared between runs."""

    options: EmulatorOptions = field(default_factory=EmulatorOptions)
    grid: tuple[int, ...] = ()
    grid_index: tuple[int, ...] = ()
    trace: list[Instr] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    affine_stack: list[AffineFrame] = field(default_factory=list)
    affine_parents: dict[int, int] = field(default_factory=dict)
    shared_allocations: list[Any] = field(default_factory=list)
    shared_cursor: int = 0
    sbuf_live: int = 0
    psum_live_banks: int = 0
    sbuf_peak: int = 0
    psum_peak_banks: int = 0
    # Per trace entry: (storage uids read, storage uids written), for the cost schedule.
    deps: list[tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)
    _reads: set[int] = field(default_factory=set)
    _writes: set[int] = field(default_factory=set)
    _read_since_record: bool = False
    _to_last: int = 0
    _loop_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    # Storages with queued TensorE products (storage.Deferred), as weak references.
    deferred: list[Any] = field(default_factory=list)
    # Engine accumulator registers of reduce_cmd instructions (isa_select.py), per engine.
    registers: dict[Any, Any] = field(default_factory=dict)
    # Random generator of nl.rand / nisa.dropout (seeded from options.seed, nl.random_seed).
    rng: Any = None

    # Hardware numbers of the selected target: read on every allocation and check, so looked
    # up once (options are frozen).
    hw: Hardware = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.hw = TARGETS[self.options.target]

    @contextlib.contextmanager
    def activate(self) -> Iterator[Run]:
        """Make this the current run for the duration of the block."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

    # -- grid -----------------------------------------------------------------------------
    def start_instance(self, index: tuple[int, ...]) -> None:
        """Begin one SPMD grid instance (shared_hbm allocations are replayed, not renewed)."""
        self.grid_index = index
        self.shared_cursor = 0

    # -- on-chip capacity -----------------------------------------------------------------
    def allocate_sbuf(self, bytes_per_partition: int) -> None:
        """Account a live SBUF tile; over capacity is an error or a finding (spill)."""
        self.sbuf_live += bytes_per_partition
        self.sbuf_peak = max(self.sbuf_peak, self.sbuf_live)
        limit = self.hw.sbuf_bytes_per_partition
        if self.sbuf_live > limit:
            msg = (
                f"live SBUF tiles need {self.sbuf_live} bytes per partition but "
                f"{self.options.target} has {limit}; free tiles earlier (narrower scope, "
                "reuse buffers) or tile smaller"
            )
            self.violation("err_sbuf_capacity_exceeded", msg, self.options.sbuf_overflow)

    def release_sbuf(self, bytes_per_partition: int) -> None:
        """Return a dead tile's SBUF bytes."""
        self.sbuf_live -= bytes_per_partition

    def allocate_psum(self, banks: int) -> None:
        """Account a live PSUM tile in whole 2 KiB banks (nki-facts §2.2: bank aligned)."""
        self.psum_live_banks += banks
        self.psum_peak_banks = max(self.psum_peak_banks, self.psum_live_banks)
        if self.psum_live_banks > self.hw.psum_banks:
            msg = (
                f"live PSUM tiles need {self.psum_live_banks} banks but there are "
                f"{self.hw.psum_banks} (2 KiB per partition each); copy results out of PSUM "
                "and drop the PSUM tile before allocating more"
            )
            if self.options.psum_overflow == "raise":
                self.psum_live_banks -= banks
            self.violation("err_psum_capacity_exceeded", msg, self.options.psum_overflow)

    def release_psum(self, banks: int) -> None:
        """Return a dead PSUM tile's banks."""
        self.psum_live_banks -= banks

    # -- affine loops ---------------------------------------------------------------------
    def enter_affine(self) -> AffineFrame:
        """Push a new affine loop instance."""
        frame = AffineFrame(next(self._loop_ids))
        self.affine_parents[frame.instance] = self.affine_stack[-1].key if self.affine_stack else -1
        self.affine_stack.append(frame)
        return frame

    def exit_affine(self, frame: AffineFrame) -> None:
        """Pop an affine loop instance (tolerates frames left by an exception)."""
        while self.affine_stack:
            if self.affine_stack.pop() is frame:
                break

    # -- reporting ------------------------------------------------------------------------
    def violation(
        self, code: str, message: str, policy: str, location: SourceLocation | None = None
    ) -> None:
        """Raise or record a rule violation according to its option policy."""
        location = location if location is not None else kernel_location()
        if policy == "raise":
            raise NkiConstraintError(code, message, location, self.context())
        self.findings.append(Finding(code, message, location))

    def context(self) -> str:
        """Coordinates to append to error messages (grid index of the failing instance)."""
        if not self.grid:
            return ""
        return f"grid instance {self.grid_index} of {self.grid}"

    def record(self, name: str, engine: Engine, **fields: Any) -> None:
        """Append one instruction to the trace (no-op unless tracing is on)."""
        if self.options.trace:
            self.add(Instr(name=name, engine=engine, location=UNKNOWN_LOCATION, **fields))

    def add(self, instr: Instr) -> None:
        """Append a built instruction at the current kernel line (tracing on: caller checks)."""
        instr.location = kernel_location()
        self.trace.append(instr)
        self.deps.append((tuple(self._reads), tuple(self._writes)))
        self._reads.clear()
        self._writes.clear()
        self._read_since_record = False

    # -- storage accesses, attributed to instructions for the cost schedule ------------------
    # Engines read their operands, then record the instruction, then (isa dialects) write the
    # result; nl ops write before recording. So: reads belong to the next recorded
    # instruction; a write belongs to the next one if it reads something first, otherwise to
    # the instruction just recorded. ``to_last_instruction`` forces the latter (assignments
    # ``t[...] = value`` that only move a just-produced result into place).
    def note_read(self, uid: int) -> None:
        """A storage was read by the instruction being executed."""
        if self._to_last or not self.options.trace:
            return
        self._reads.add(uid)
        self._read_since_record = True

    def note_write(self, uid: int) -> None:
        """A storage was written by the instruction being executed."""
        if not self.options.trace:
            return
        if self.deps and (self._to_last or not self._read_since_record):
            reads, writes = self.deps[-1]
            if uid not in writes:
                self.deps[-1] = (reads, (*writes, uid))
            return
        self._writes.add(uid)

    def wrote_last(self, uid: int) -> bool:
        """Whether the last recorded instruction wrote this storage."""
        return bool(self.deps) and uid in self.deps[-1][1]

    def to_last_instruction(self) -> _ToLast:
        """Attribute the accesses in this block to the last recorded instruction."""
        return _ToLast(self)


class _ToLast:
    """``with run.to_last_instruction():`` — a plain class: a generator-based context manager
    costs several times more, and every PSUM ``+=`` enters one."""

    __slots__ = ("run",)

    def __init__(self, run: Run) -> None:
        self.run = run

    def __enter__(self) -> None:
        self.run._to_last += 1

    def __exit__(self, *exc: object) -> None:
        self.run._to_last -= 1


def record_tile(name: str, engine: Engine, tile: Any, streams: int = 1) -> None:
    """Trace a compute instruction over ``tile`` (its partitions and free size) if in a run."""
    run = _CURRENT.get()
    if run is not None and run.options.trace:
        parts, free, dtype = tile.partitions, tile.free_size, dtype_name(tile.dtype)
        run.add(Instr(name, engine, parts, free, dtype, UNKNOWN_LOCATION, streams))
