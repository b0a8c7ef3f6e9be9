"""Every check setting of the emulator in one frozen, validated dataclass.

Strict choices are the defaults (house rule 7): a kernel that passes the emulator with default
options should not hit the same class of problem on hardware. The exception is legal NKI that
real hardware runs (an output left partly unwritten): it runs, and the finding is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Target = Literal["trn1", "trn2"]
Uninit = Literal["nan", "zero"]
Policy = Literal["raise", "report"]
GridOrder = Literal["sequential", "shuffled"]
Precision = Literal["hardware", "fp32"]


@dataclass(frozen=True, kw_only=True)
class EmulatorOptions:
    """Knobs for one emulated run.

    target:           hardware generation whose limits and cost numbers apply.
    uninit:           fill of fresh SBUF/PSUM/HBM-output allocations; "nan" poisons floats with
                      NaN and integers with their maximum value (house rule 8), "zero" fills 0.
    uninit_outputs:   what to do when a returned HBM tensor holds elements that were never
                      written or were computed from uninitialised memory. Default "report":
                      NKI lets a kernel leave part of an output unwritten (the elements hold
                      garbage on hardware, NaN/max-int poison here), so legal kernels run and
                      ``Run.findings`` gets an ``err_uninitialized_output`` finding (the scorer
                      turns it into its verdict); "raise" makes it an error.
    affine_deps:      what to do when an ``affine_range`` iteration reads or overwrites data
                      another iteration of the same loop wrote ("report" appends to
                      ``Run.findings`` and continues).
    sbuf_overflow:    live SBUF bytes per partition above capacity: "raise", or "report" (the
                      real compiler spills to HBM, nki-facts §2.4).
    psum_overflow:    live PSUM tiles needing more than the 8 banks: "raise", or "report" (the
                      legacy compiler allocates block-dimension PSUM tensors lazily and spills;
                      published tutorials rely on it, e.g. a (32, 2, 128, 512) fp32 PSUM tensor).
    trace:            record one entry per instruction for the cost model.
    grid_order:       order of SPMD grid instances: "sequential" (row-major, what legacy NKI
                      does on one core, nki-facts §1.6) or "shuffled" with ``seed`` to expose
                      kernels that silently depend on instance order (house rule 10).
    seed:             seed for "shuffled", and of the random generator (nl.rand, dropout).
    precision:        "hardware" (default): engines compute in fp32 and every result is rounded
                      to its tile's dtype, as on a NeuronCore (``activation(dtype=nl.bfloat16)``
                      gives bf16 values). "fp32" mimics AWS's simulators (legacy
                      ``simulate_kernel`` computed bfloat16/fp8 in fp32, nki_known_issues;
                      ``NKI_PRECISE_FP=0`` for the new one): on-chip tiles declared bfloat16 or
                      fp8 are held in fp32 (their dtype reads float32); HBM tensors keep theirs.
    """

    target: Target = "trn2"
    uninit: Uninit = "nan"
    uninit_outputs: Policy = "report"
    affine_deps: Policy = "raise"
    sbuf_overflow: Policy = "raise"
    psum_overflow: Policy = "raise"
    trace: bool = True
    grid_order: GridOrder = "sequential"
    seed: int = 0
    precision: Precision = "hardware"

    def __post_init__(self) -> None:
        for name, kind in (
            ("target", Target),
            ("uninit", Uninit),
            ("uninit_outputs", Policy),
            ("affine_deps", Policy),
            ("sbuf_overflow", Policy),
            ("psum_overflow", Policy),
            ("grid_order", GridOrder),
            ("precision", Precision),
        ):
            value = getattr(self, name)
            allowed = get_args(kind)
            if value not in allowed:
                raise ValueError(f"EmulatorOptions.{name}={value!r} is not one of {allowed!r}")
        if not isinstance(self.trace, bool):
            raise ValueError(f"EmulatorOptions.trace must be a bool, got {self.trace!r}")
