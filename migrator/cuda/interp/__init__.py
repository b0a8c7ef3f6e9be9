"""The CUDA oracle: run CUDA kernels on the CPU with CUDA semantics, vectorised over threads.

Every value is a numpy array over lanes (all threads of a batch of blocks) with an active-lane
mask; statements run for all active lanes at once, never one Python step per thread. See
`runner.run_kernel` (one launch) and `spec_run.run_spec` (a task spec's launch and inputs).
"""

from migrator.cuda.interp.findings import (
    BarrierError,
    Finding,
    InterpError,
    LaunchError,
    OutOfBoundsError,
    UnsupportedError,
)
from migrator.cuda.interp.options import InterpOptions
from migrator.cuda.interp.runner import RunResult, run_kernel
from migrator.cuda.interp.spec_run import SpecRun, run_spec, run_spec_full

__all__ = [
    "BarrierError",
    "Finding",
    "InterpError",
    "InterpOptions",
    "LaunchError",
    "OutOfBoundsError",
    "RunResult",
    "SpecRun",
    "UnsupportedError",
    "run_kernel",
    "run_spec",
    "run_spec_full",
]
