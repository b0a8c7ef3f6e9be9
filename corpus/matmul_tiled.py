"""Reference for matmul_tiled.cu: C = alpha * A @ B + beta * C (C is updated in place)."""

import numpy as np


def reference(
    A: np.ndarray, B: np.ndarray, C: np.ndarray, *, alpha: float, beta: float
) -> np.ndarray:
    a = np.float64(np.float32(alpha))
    b = np.float64(np.float32(beta))
    out = a * (A.astype(np.float64) @ B.astype(np.float64)) + b * C.astype(np.float64)
    return out.astype(np.float32)
