"""The NKI side: a CPU emulator for NKI kernels with Trainium semantics and cost accounting.

Entry points: ``simulate()`` (scoped ``neuronxcc.nki``/``nki`` import shim),
``load_kernel_module(path)``, ``run_kernel(kernel, *arrays)`` and ``profile(kernel, *arrays)``.
"""

from .cost import Profile, profile
from .errors import NkiConstraintError, NkiUnsupportedError
from .frontend import Kernel, run_kernel
from .options import EmulatorOptions
from .run import Run
from .shim import load_kernel_module, simulate

__all__ = [
    "EmulatorOptions",
    "Kernel",
    "NkiConstraintError",
    "NkiUnsupportedError",
    "Profile",
    "Run",
    "load_kernel_module",
    "profile",
    "run_kernel",
    "simulate",
]
