"""Every interpreter setting in one frozen, validated dataclass (house rule 7).

The strictest choice is the default: out-of-bounds accesses raise, fresh memory is NaN-poisoned,
races are checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OOB_MODES = ("raise", "report", "shared_reads")
UNINIT_MODES = ("nan", "zero")


@dataclass(frozen=True, kw_only=True)
class InterpOptions:
    """Settings of one interpreter run.

    fmad: contract `a*b+c` on float32 into one rounding, as nvcc's default `-fmad=true`.
    fast_math: accepted for API compatibility; currently only implies `fmad` (approximate
        intrinsics such as `__expf` evaluate like `expf`).
    shadow_f64: evaluate `float` arithmetic and buffers in float64 (a high-precision truth);
        outputs come back as float64.
    oob: "raise" stops at the first out-of-bounds access; "report" records a finding, skips
        the store / returns poison for the load, and continues; "shared_reads" reports reads
        past a shared array (poison, as "report") and raises on anything else (the oracle's
        rerun of a kernel whose lanes over-read shared memory, `spec_run.run_spec_full`).
    uninit: fill of fresh shared/local memory: NaN/iinfo.max ("nan") or zero.
    block_batch: blocks run at once (None: as many as fit a lane budget of ~1M lanes).
    races: check shared-memory races between barriers.
    compact: run statements that few lanes execute over just those lanes (gather, run,
        scatter; `compact.py`). False evaluates every statement over all lanes: the slow
        reference path the fast one is tested against.
    widen: run an accumulating loop (`for (...) acc += E;`) by evaluating E over all its steps
        at once, then applying the steps' assignments in order (`widen.py`). False steps
        through the body: the reference path the widened one is tested against.
    trace: store every floating-point value as a traced `Sym` (`traced.py`): each output
        element comes back as the expression over input elements that computed it (the
        lifter's input; slow, for small sizes). Float array arguments must be object arrays.
    extents: measure how far the kernel reaches into each array argument
        (`RunResult.extents`: one past the highest element accessed, out-of-bounds accesses
        included), the evidence spec inference uses where indices do not show a shape.
    writers: record which block wrote each element of each array argument
        (`RunResult.writers`: the linear block id, -1 never written, -2 several blocks that
        stored different values; where blocks store what another stored, one of them; and
        `cross_block_reads`: whether a block loaded an element another block had stored).
    stores: the array arguments (by parameter name) whose elements a store or an atomic
        reached are recorded (`RunResult.stored`: a bool per element): which elements of an
        output the kernel never wrote, without a second run.
    blocks: run only these linear block ids (sorted, unique; None: the whole grid). Blocks
        share nothing but global memory, so a subset computes what the full launch computes
        in those blocks; the lifter traces the few blocks that write the elements it fits.
    """

    fmad: bool = True
    fast_math: bool = False
    shadow_f64: bool = False
    oob: Literal["raise", "report", "shared_reads"] = "raise"
    uninit: Literal["nan", "zero"] = "nan"
    block_batch: int | None = None
    races: bool = True
    compact: bool = True
    widen: bool = True
    max_loop_iterations: int = 1 << 20
    extents: bool = False
    trace: bool = False
    writers: bool = False
    stores: tuple[str, ...] = ()
    blocks: tuple[int, ...] | None = None
    # stop a run past this many thread-statements (0: no limit); a traced run is slow per
    # value, and the lifter sizes its work by this rather than by a clock
    max_thread_statements: int = 0

    def __post_init__(self) -> None:
        if self.oob not in OOB_MODES:
            raise ValueError(f"oob={self.oob!r}: expected one of {OOB_MODES}")
        if self.uninit not in UNINIT_MODES:
            raise ValueError(f"uninit={self.uninit!r}: expected one of {UNINIT_MODES}")
        if self.block_batch is not None and (
            not isinstance(self.block_batch, int) or self.block_batch < 1
        ):
            raise ValueError(f"block_batch={self.block_batch!r}: expected a positive int or None")
        if self.blocks is not None and (
            list(self.blocks) != sorted(set(self.blocks)) or any(b < 0 for b in self.blocks)
        ):
            raise ValueError(f"blocks={self.blocks!r}: expected sorted, unique block ids >= 0")
        for name in ("fmad", "fast_math", "shadow_f64", "races", "compact", "widen", "extents",
                     "trace", "writers"):  # fmt: skip
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: expected a bool")
        if not isinstance(self.stores, tuple) or not all(isinstance(n, str) for n in self.stores):
            raise ValueError(f"stores={self.stores!r}: expected a tuple of parameter names")
        if self.max_loop_iterations < 1:
            raise ValueError(f"max_loop_iterations={self.max_loop_iterations!r}: must be >= 1")

    @property
    def contract(self) -> bool:
        """Whether float32 `a*b+c` is fused (fmad, or implied by fast_math)."""
        return (self.fmad or self.fast_math) and not self.trace
