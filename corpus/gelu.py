"""Reference for gelu.cu: tanh-approximation GELU."""

import numpy as np


def reference(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    inner = np.sqrt(2.0 / np.pi) * (v + 0.044715 * v**3)
    return (0.5 * v * (1.0 + np.tanh(inner))).astype(np.float32)
