"""Reference for hgemm_bf16.cu: C = A @ B, bf16 inputs widened exactly, float32 output."""

import numpy as np


def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    # bf16 -> float64 is exact, so this is the exact product sum rounded once to float32
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
