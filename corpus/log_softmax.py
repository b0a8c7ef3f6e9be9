"""Reference for log_softmax.cu: stable row log-softmax of a [R, C] matrix."""

import numpy as np


def reference(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    m = v.max(axis=1, keepdims=True)
    lse = m + np.log(np.exp(v - m).sum(axis=1, keepdims=True))
    return (v - lse).astype(np.float32)
