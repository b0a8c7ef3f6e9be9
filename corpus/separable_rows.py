"""Reference for separable_rows.cu: out[y, x] = sum_t c_taps[t] * img[y, x + t - R], 0 outside."""

import numpy as np


def reference(img: np.ndarray, c_taps: np.ndarray) -> np.ndarray:
    h, w = img.shape
    r = c_taps.shape[0] // 2
    padded = np.zeros((h, w + 2 * r), dtype=np.float64)
    padded[:, r : r + w] = img.astype(np.float64)
    out = np.zeros((h, w), dtype=np.float64)
    for t in range(c_taps.shape[0]):
        out += float(c_taps[t]) * padded[:, t : t + w]
    return out.astype(np.float32)
