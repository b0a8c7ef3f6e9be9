"""Reference for stencil_1d.cu: 7-point stencil with zero boundary, weights as in c_weights."""

import numpy as np

RADIUS = 3
# Same literals as `c_weights` in stencil_1d.cu, rounded to float32 as the device constant is.
WEIGHTS = np.array([0.02, -0.05, 0.15, 0.5, 0.25, 0.1, 0.03], dtype=np.float32)


def reference(x: np.ndarray) -> np.ndarray:
    n = x.shape[0]
    padded = np.zeros(n + 2 * RADIUS, dtype=np.float64)
    padded[RADIUS : RADIUS + n] = x.astype(np.float64)
    w = WEIGHTS.astype(np.float64)
    out = np.zeros(n, dtype=np.float64)
    for j in range(2 * RADIUS + 1):
        out += w[j] * padded[j : j + n]
    return out.astype(np.float32)
