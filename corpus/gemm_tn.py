"""Reference for gemm_tn.cu: C = A^T @ B with A stored [K, M]."""

import numpy as np


def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return (A.astype(np.float64).T @ B.astype(np.float64)).astype(np.float32)
