"""Reference for bitonic_sort.cu: each segment of 512 keys sorted ascending (ragged tail too)."""

import numpy as np

SEGMENT = 512


def reference(keys_in: np.ndarray) -> np.ndarray:
    out = np.array(keys_in, dtype=np.float32, copy=True)
    for start in range(0, out.shape[0], SEGMENT):
        out[start : start + SEGMENT] = np.sort(out[start : start + SEGMENT])
    return out
