"""Arrays across the sandbox boundary as .npy files, keeping ml_dtypes (bf16, fp8) by name.

`np.save` writes an ml_dtypes array as raw bytes (`|V2`, `|V1`) that load back typeless, so the
dtype's name travels beside the file and the loader views the bytes as that dtype again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def dtype_of(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def save(path: Path, arr: np.ndarray) -> str:
    """Write `arr`; returns the dtype name `load` needs."""
    np.save(path, arr, allow_pickle=False)
    return arr.dtype.name


def load(path: Path, dtype_name: str | None) -> np.ndarray:
    arr = np.load(path, allow_pickle=False)
    if dtype_name and arr.dtype.kind == "V":
        arr = arr.view(dtype_of(dtype_name))
    return arr
