"""The NKI side: a CPU emulator for NKI kernels with Trainium semantics and cost accounting.

Kernels written for the real toolchain run unmodified::

    import migrator.nki as mn

    kernels = mn.load_kernel_module("my_kernels.py")  # its `import neuronxcc.nki...` resolve here
    out = kernels.tensor_add[2, 2](a, b)                # numpy in, numpy out
    prof = mn.profile(kernels.tensor_add[2, 2], a, b)   # per-engine cost estimate (pydantic)

or inside ``with mn.simulate(): import nki ...``. ``run_kernel`` returns the outputs and the
``Run`` (trace, findings, peak memory). Module map: options (settings), errors, dtypes,
hardware (per-target numbers), run (per-launch state), storage/tensor (memory model, copy on
write), views (new-dialect ``.ap()`` access patterns), checks (constraints), ops (operator
table), language + nl_memory + nl_composite + nl_int (``nl``; nl_int: exact integer and
bit-vector ops), isa + isa_common + isa_extra (instruction engine), isa_legacy / isa_dst (the
two ``nisa`` dialects), compiler_mod (``nki.compiler`` hints, no-ops), dma (descriptor
accounting), frontend (jit, grids), shim (imports), trace + cost (cost model with a dependency
schedule; `render_profile`), backends, support (generated API table).
"""

from .cost import Profile, profile
from .errors import NkiConstraintError, NkiKernelError, NkiUnsupportedError
from .frontend import Kernel, run_kernel
from .options import EmulatorOptions
from .run import Run
from .shim import load_kernel_module, simulate

__all__ = [
    "EmulatorOptions",
    "Kernel",
    "NkiConstraintError",
    "NkiKernelError",
    "NkiUnsupportedError",
    "Profile",
    "Run",
    "load_kernel_module",
    "profile",
    "run_kernel",
    "simulate",
]
