"""Reference for attention_causal_online.cu: O = softmax(Q K^T * scale, keys <= query) V."""

import numpy as np


def reference(Q: np.ndarray, K: np.ndarray, V: np.ndarray, *, scale: float) -> np.ndarray:
    s = (Q.astype(np.float64) @ K.astype(np.float64).T) * np.float64(np.float32(scale))
    T = s.shape[0]
    s[np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf  # key j > query t: no weight
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return (p @ V.astype(np.float64)).astype(np.float32)
