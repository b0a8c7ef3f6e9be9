"""Reference for swiglu.cu: silu(gate) * up with gate = x[:, :C], up = x[:, C:]."""

import numpy as np


def reference(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    c = v.shape[1] // 2
    gate, up = v[:, :c], v[:, c:]
    return (gate / (1.0 + np.exp(-gate)) * up).astype(np.float32)
