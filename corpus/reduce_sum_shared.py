"""Reference for reduce_sum_shared.cu: one partial sum per 512-element chunk (2 * 256 threads)."""

import numpy as np

CHUNK = 2 * 256


def reference(x: np.ndarray) -> np.ndarray:
    n = x.shape[0]
    blocks = -(-n // CHUNK)
    padded = np.zeros(blocks * CHUNK, dtype=np.float64)
    padded[:n] = x.astype(np.float64)
    return padded.reshape(blocks, CHUNK).sum(axis=1).astype(np.float32)
