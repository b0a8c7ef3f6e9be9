"""Reference for rmsnorm.cu: y = x / sqrt(mean(x^2) + eps) * weight, per row."""

import numpy as np


def reference(x: np.ndarray, weight: np.ndarray, *, eps: float) -> np.ndarray:
    v = x.astype(np.float64)
    e = np.float64(np.float32(eps))
    ms = (v * v).mean(axis=1, keepdims=True)
    y = v / np.sqrt(ms + e) * weight.astype(np.float64)
    return y.astype(np.float32)
