"""Reference for scale_2d_pitch.cu: out = alpha * x + beta (dense rows, ld = C)."""

import numpy as np


def reference(x: np.ndarray, *, alpha: float, beta: float) -> np.ndarray:
    a = np.float64(np.float32(alpha))
    b = np.float64(np.float32(beta))
    return (a * x.astype(np.float64) + b).astype(np.float32)
