"""Reference for saxpy.cu: y = a * x + y (y is updated in place by the kernel)."""

import numpy as np


def reference(x: np.ndarray, y: np.ndarray, *, a: float) -> np.ndarray:
    out = np.float64(np.float32(a)) * x.astype(np.float64) + y.astype(np.float64)
    return out.astype(np.float32)
