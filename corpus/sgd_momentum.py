"""Reference for sgd_momentum.cu: one SGD-with-momentum step; returns (param, momentum_buf)."""

import numpy as np


def reference(
    param: np.ndarray,
    momentum_buf: np.ndarray,
    grad: np.ndarray,
    *,
    lr: float,
    momentum: float,
    weight_decay: float,
) -> tuple[np.ndarray, np.ndarray]:
    f = np.float64
    lr_, mom, wd = (f(np.float32(v)) for v in (lr, momentum, weight_decay))
    p, b, g = (a.astype(f) for a in (param, momentum_buf, grad))
    d = g + wd * p
    buf = mom * b + d
    p = p - lr_ * buf
    return p.astype(np.float32), buf.astype(np.float32)
