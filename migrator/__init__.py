"""cuda2nki: automated CUDA → NKI migration with fidelity scoring.

The import package is ``migrator``; the console script is ``migrate``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cuda2nki")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
