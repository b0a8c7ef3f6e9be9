"""Reference for scan_warp: inclusive prefix sums within each block of 256 elements."""

import numpy as np

BLOCK = 256


def reference(x):
    n = x.shape[0]
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, BLOCK):
        out[start : start + BLOCK] = np.cumsum(x[start : start + BLOCK].astype(np.float64))
    return out.astype(np.float32)
