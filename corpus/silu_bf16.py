"""Reference for silu_bf16.cu: SiLU x * sigmoid(x) on bfloat16, returned as bfloat16."""

import ml_dtypes
import numpy as np


def reference(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    return (v / (1.0 + np.exp(-v))).astype(ml_dtypes.bfloat16)
