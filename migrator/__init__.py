"""cuda2nki: automated CUDA → NKI migration with fidelity scoring.

The import package is ``migrator``; the console script is ``migrate``. Library API::

    import migrator
    tu = migrator.inspect("kernel.cu")            # kernel IR (TranslationUnit)
    m = migrator.migrate("kernel.cu", out_dir="out")  # Migration: NKI kernel, report, checks
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("cuda2nki")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

# name -> module; imported on first use so `import migrator` stays cheap
_LAZY = {
    "inspect": "migrator.api",
    "migrate": "migrator.migration",
    "Migration": "migrator.migration",
    "TranslationUnit": "migrator.cuda.ir",
    "load_spec": "migrator.contract",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'migrator' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
