"""Reference for relu_half.cu: ReLU on float16, returned as float16."""

import numpy as np


def reference(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    return np.maximum(v, 0.0).astype(np.float16)
