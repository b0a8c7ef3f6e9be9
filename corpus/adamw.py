"""Reference for adamw.cu: one AdamW step; returns (param, exp_avg, exp_avg_sq), all updated."""

import numpy as np


def reference(
    param: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    grad: np.ndarray,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step_size: float,
    bias_correction2_sqrt: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f = np.float64
    s = {
        k: f(np.float32(v))
        for k, v in dict(
            lr=lr,
            b1=beta1,
            b2=beta2,
            eps=eps,
            wd=weight_decay,
            step=step_size,
            bc2=bias_correction2_sqrt,
        ).items()
    }
    p, m0, v0, g = (a.astype(f) for a in (param, exp_avg, exp_avg_sq, grad))
    p = p * (1.0 - s["lr"] * s["wd"])
    m = s["b1"] * m0 + (1.0 - s["b1"]) * g
    v = s["b2"] * v0 + (1.0 - s["b2"]) * g * g
    p = p - s["step"] * m / (np.sqrt(v) / s["bc2"] + s["eps"])
    return p.astype(np.float32), m.astype(np.float32), v.astype(np.float32)
