"""cuda2nki: automated CUDA → NKI migration with fidelity scoring.

The import package is ``migrator``; the console script is ``migrate``. Library API::

    import migrator
    tu = migrator.inspect("kernel.cu")            # kernel IR (TranslationUnit)
    m = migrator.migrate("kernel.cu", out_dir="out")  # Migration: NKI kernel, report, checks
"""

from pathlib import Path as _Path
from typing import Any

# In a source checkout imported directly (cwd on sys.path: `python -m pytest`, Ray workers that
# start in the driver's directory), patterns/ and templates/ sit beside migrator/ rather than in
# it, as pyproject maps them at install time; search the checkout root too so
# `migrator.patterns` and `migrator.templates` resolve the same way. Installed copies, which
# carry both inside the package, are untouched.
_HERE = _Path(__file__).resolve().parent
if not (_HERE / "patterns").is_dir() and all(
    (_HERE.parent / f).is_file()
    for f in ("pyproject.toml", "patterns/__init__.py", "templates/__init__.py")
):
    __path__.append(str(_HERE.parent))


# name -> module; imported on first use so `import migrator` stays cheap
_LAZY = {
    "inspect": "migrator.api",
    "migrate": "migrator.migration",
    "Migration": "migrator.migration",
    "TranslationUnit": "migrator.cuda.ir",
    "load_spec": "migrator.contract",
}

__all__ = ["__version__", *_LAZY]


def _version() -> str:
    # importlib.metadata (and the email parser it brings) is a tenth of `migrate`'s imports:
    # read only when the version is asked for
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cuda2nki")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        v = globals()["__version__"] = _version()
        return v
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'migrator' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
