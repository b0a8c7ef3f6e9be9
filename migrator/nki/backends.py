"""Where kernels run: the emulator (default) or the real Neuron SDK when it is installed.

The Neuron packages live on the Neuron pip repository, not PyPI; ``NeuronBackend`` is only
available when ``neuronxcc`` or ``nki`` is importable and is never faked in tests.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Literal, Protocol

import numpy as np

from .frontend import run_kernel
from .options import EmulatorOptions
from .shim import real_package_available

BackendName = Literal["emulator", "neuron"]


class Backend(Protocol):
    """Runs an NKI kernel on numpy arrays and returns numpy outputs."""

    name: str

    def run(self, kernel: Any, *arrays: np.ndarray, grid: Any = (), **kwargs: Any) -> Any:
        """Execute ``kernel`` and return its outputs as numpy arrays."""
        ...


class EmulatorBackend:
    """The NumPy emulator in this package."""

    name = "emulator"

    def __init__(self, options: EmulatorOptions | None = None) -> None:
        self.options = options or EmulatorOptions()

    def run(self, kernel: Any, *arrays: np.ndarray, grid: Any = (), **kwargs: Any) -> Any:
        """Run under a fresh ``Run``; constraint errors propagate."""
        outputs, _ = run_kernel(kernel, *arrays, grid=grid, options=self.options, **kwargs)
        return outputs

    @staticmethod
    def available() -> bool:
        """Always available."""
        return True


class NeuronBackend:
    """The real toolchain's simulator/hardware path (legacy ``neuronxcc.nki`` or ``nki``)."""

    name = "neuron"

    @staticmethod
    def available() -> bool:
        """True when a real ``neuronxcc`` or ``nki`` package is importable."""
        return real_package_available("neuronxcc") or real_package_available("nki")

    def __init__(self) -> None:
        if not self.available():
            raise RuntimeError(
                "the Neuron SDK is not installed (neuronxcc / nki come from the Neuron pip "
                "repository, https://pip.repos.neuron.amazonaws.com); use EmulatorBackend"
            )
        name = "nki" if real_package_available("nki") else "neuronxcc.nki"
        self.module = importlib.import_module(name)

    def run(self, kernel: Any, *arrays: np.ndarray, grid: Any = (), **kwargs: Any) -> Any:
        """Run through the SDK's own simulator entry point."""
        target = kernel[grid] if grid else kernel
        if hasattr(self.module, "simulate"):
            return self.module.simulate(target)(*arrays, **kwargs)
        return self.module.simulate_kernel(target, *arrays, **kwargs)


def select_backend(
    prefer: BackendName | None = None, options: EmulatorOptions | None = None
) -> EmulatorBackend | NeuronBackend:
    """The preferred backend; "neuron" raises if the SDK is missing, None means emulator."""
    if prefer is None or prefer == "emulator":
        return EmulatorBackend(options)
    if prefer == "neuron":
        return NeuronBackend()
    raise ValueError(f"unknown backend {prefer!r}; expected 'emulator' or 'neuron'")
