"""Reference for gemv.cu: y = A @ x."""

import numpy as np


def reference(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    return (A.astype(np.float64) @ x.astype(np.float64)).astype(np.float32)
