"""Reference for conv1d.cu: K-tap cross-correlation with "same" zero padding (K = len(w))."""

import numpy as np


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, k = x.shape[0], w.shape[0]
    pad = k // 2
    padded = np.zeros(n + k - 1, dtype=np.float64)
    padded[pad : pad + n] = x.astype(np.float64)
    out = np.zeros(n, dtype=np.float64)
    for j in range(k):
        out += float(w[j]) * padded[j : j + n]
    return out.astype(np.float32)
