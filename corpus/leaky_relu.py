"""Reference for leaky_relu.cu: leaky ReLU with slope negative_slope."""

import numpy as np


def reference(x: np.ndarray, *, negative_slope: float) -> np.ndarray:
    v = x.astype(np.float64)
    s = np.float64(np.float32(negative_slope))
    return np.where(v > 0.0, v, v * s).astype(np.float32)
