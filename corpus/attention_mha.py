"""Reference for attention_mha.cu: causal softmax(Q K^T * scale) V per (batch, head)."""

import numpy as np


def reference(Q: np.ndarray, K: np.ndarray, V: np.ndarray, *, scale: float) -> np.ndarray:
    q, k, v = (a.astype(np.float64) for a in (Q, K, V))
    s = np.einsum("bhtd,bhjd->bhtj", q, k) * np.float64(np.float32(scale))
    T = s.shape[-1]
    s[..., np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf  # key j after query t
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhtj,bhjd->bhtd", p, v).astype(np.float32)
