"""Reference for col_sum.cu: column sums of a [R, C] matrix."""

import numpy as np


def reference(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64).sum(axis=0).astype(np.float32)
