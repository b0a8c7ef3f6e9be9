"""Reference for layernorm_backward.cu: (dweight, dbias, dx) in the calling order (inouts, then
the output)."""

import numpy as np


def reference(dy, x, weight, mean, rstd, dweight, dbias):
    dy, x, w = (a.astype(np.float64) for a in (dy, x, weight))
    mu, rs = mean.astype(np.float64)[:, None], rstd.astype(np.float64)[:, None]
    xhat = (x - mu) * rs
    g = w[None, :] * dy
    dx = rs * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
    dweight = dweight.astype(np.float64) + (xhat * dy).sum(axis=0)
    dbias = dbias.astype(np.float64) + dy.sum(axis=0)
    return dweight.astype(np.float32), dbias.astype(np.float32), dx.astype(np.float32)
