"""Reference for l2_norm_sq.cu: result[0] + sum(x^2)."""

import numpy as np


def reference(x: np.ndarray, result: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    total = result.astype(np.float64)[0] + np.dot(v, v)
    return np.array([total], dtype=np.float32)
