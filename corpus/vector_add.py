"""Reference for vector_add.cu: c = a + b."""

import numpy as np


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    c = a.astype(np.float64) + b.astype(np.float64)
    return c.astype(np.float32)
