"""Reference for bias_gelu_2d.cu: exact (erf) GELU of x + bias (bias broadcast along rows)."""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def reference(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    # the kernel adds in fp32 before the activation
    v = (x.astype(np.float32) + bias.astype(np.float32)[None, :]).astype(np.float64)
    return (0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)))).astype(np.float32)
