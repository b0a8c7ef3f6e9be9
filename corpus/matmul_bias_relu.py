"""Reference for matmul_bias_relu.cu: C = relu(A @ B + bias)."""

import numpy as np


def reference(A: np.ndarray, B: np.ndarray, bias: np.ndarray) -> np.ndarray:
    z = A.astype(np.float64) @ B.astype(np.float64) + bias.astype(np.float64)
    return np.maximum(z, 0.0).astype(np.float32)
