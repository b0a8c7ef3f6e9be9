"""Reference for sigmoid_vec4.cu: logistic sigmoid."""

import numpy as np


def reference(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    return (1.0 / (1.0 + np.exp(-v))).astype(np.float32)
