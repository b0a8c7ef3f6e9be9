"""Reference for histogram: bins + counts of (key % 64)."""

import numpy as np

NUM_BINS = 64


def reference(keys, bins):
    counts = np.bincount(keys.astype(np.int64) % NUM_BINS, minlength=NUM_BINS)
    return (bins.astype(np.int64) + counts).astype(np.uint32)
