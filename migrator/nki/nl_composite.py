"""Composite and convenience ``nl`` APIs built from the primitive ops.

Composites are expressed through the primitives, so they are traced as the instructions the
compiler would emit (e.g. softmax = max, subtract, exp, sum, divide).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dt
from . import language as _nl
from .checks import check_partitions, require_buffer, require_on_chip
from .dma import record_dma
from .errors import NkiConstraintError, NkiNotEmulatedError
from .run import maybe_current_run, record_tile
from .tensor import Buffer, Storage, Tensor
from .trace import Engine


def softmax(
    x: Any, axis: Any = -1, *, dtype: Any = None, compute_dtype: Any = None, mask: Any = None
) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along free ``axis``; the engines compute in fp32,
    so ``compute_dtype`` may only name float32 (anything else is not emulated)."""
    _fp32_compute("nl.softmax", compute_dtype)
    peak = _nl.max(x, axis=axis, keepdims=True, mask=mask)  # keepdims: broadcasts on any rank
    expo = _nl.exp(_nl.subtract(x, peak, mask=mask), mask=mask)
    total = _nl.sum(expo, axis=axis, keepdims=True, mask=mask)
    return _nl.divide(expo, total, dtype=dtype, mask=mask)


def _fp32_compute(api: str, compute_dtype: Any) -> None:
    if compute_dtype is not None and _dt.normalize(compute_dtype) != _dt.float32:
        raise NkiNotEmulatedError(api, "compute_dtype", compute_dtype)


def rms_norm(
    x: Any,
    w: Any,
    axis: Any,
    n: int,
    epsilon: float = 1e-6,
    *,
    dtype: Any = None,
    compute_dtype: Any = None,
    mask: Any = None,
) -> Tensor:
    """``x * rsqrt(sum(x^2, axis) / n + epsilon) * w`` (fp32 compute, see softmax)."""
    _fp32_compute("nl.rms_norm", compute_dtype)
    # the mask predicates the elements of x; the per-row statistics are (P, 1) tiles
    ms = _nl.divide(_nl.sum(_nl.square(x, mask=mask), axis=axis, mask=mask), float(n))
    scaled = _nl.multiply(x, _nl.rsqrt(_nl.add(ms, epsilon)), mask=mask)
    return _nl.multiply(scaled, w, dtype=dtype, mask=mask)


def var(
    x: Any, axis: Any, *, dtype: Any = None, keepdims: bool = False, mask: Any = None
) -> Tensor:
    """Population variance along free ``axis`` (fp32 math)."""
    centred = _nl.subtract(x, _nl.mean(x, axis=axis, mask=mask), dtype=_dt.float32, mask=mask)
    return _nl.mean(
        _nl.square(centred, mask=mask), axis=axis, dtype=dtype, keepdims=keepdims, mask=mask
    )


def broadcast_to(src: Any, shape: Any, dtype: Any = None) -> Tensor:
    """Broadcast a tile, e.g. (1, F) → (P, F) or (P, 1) → (P, F); ``dtype`` casts (a copy)."""
    out = require_on_chip(src, "nl.broadcast_to", "src").broadcast_to(shape)
    return out if dtype is None or _dt.normalize(dtype) == out.dtype else _nl.copy(out, dtype=dtype)


def load_transpose2d(src: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """DMA a 2-D HBM view (F, P) into an SBUF tile (P, F)."""
    t = require_buffer(src, "nl.load_transpose2d", "src", ("hbm",))
    if t.ndim != 2:
        raise NkiConstraintError(
            "err_exceed_max_supported_dimension",
            f"nl.load_transpose2d: src must be 2-D, got {t.shape}",
        )
    check_partitions(t.shape[::-1], 0, "nl.load_transpose2d result")
    data, valid = t.read()
    out_dt = _dt.normalize(dtype) if dtype is not None else t.dtype
    values = data.T if data.dtype == out_dt else _dt.to_f32(data).T
    m = None if mask is None else np.broadcast_to(np.asarray(mask, bool), values.shape)
    out = Tensor.from_values(values, None if valid is None else valid.T, out_dt, Buffer.SBUF, m)
    record_dma("load", t, out, None)
    return out


def shared_constant(constant: Any, dtype: Any = None) -> Tensor:
    """A read-only HBM tensor holding a numpy constant (e.g. an identity matrix)."""
    data = np.asarray(constant)
    dt = _dt.normalize(dtype if dtype is not None else data.dtype)
    return Tensor(
        Storage(np.ascontiguousarray(_dt.cast(data.astype(np.float32), dt)), Buffer.SHARED_HBM)
    )


def shared_identity_matrix(n: int, dtype: Any = _dt.uint8) -> Tensor:
    """An (n, n) identity tile in SBUF (for TensorE transposes)."""
    eye = np.eye(int(n), dtype=np.float32)
    out = Tensor.from_values(eye, None, _dt.normalize(dtype), Buffer.SBUF)
    if maybe_current_run() is not None:
        record_tile("memset", Engine.GPSIMD, out)
    return out
