"""New standalone ``nki.isa`` dialect: explicit destination first, no masks.

Each function writes its result into ``dst`` through the same ``IsaEngine`` methods the legacy
dialect uses and returns ``dst`` (the real API returns an instruction handle).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import NkiConstraintError, unsupported
from .isa import engine as _engine
from .isa_common import get_nc_version, nc_version, reduce_cmd  # noqa: F401 - nisa surface
from .ops import BINARY, resolve
from .tensor import Tensor


def nc_matmul(
    dst: Tensor, stationary: Tensor, moving: Tensor, *, accumulate: bool | None = None, **_: Any
) -> Tensor:
    """``dst (+)= stationary.T @ moving``; ``accumulate=None``: first write overwrites."""
    return _engine.nc_matmul(stationary, moving, dst=dst, accumulate=accumulate)


def nc_transpose(dst: Tensor, data: Tensor, engine: Any = None, **_: Any) -> Tensor:
    """Partition↔free transpose into ``dst``."""
    return _engine.nc_transpose(data, dst=dst, engine=engine)


def activation(
    dst: Tensor,
    op: Any,
    data: Tensor,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Tensor | None = None,
    **_: Any,
) -> Tensor:
    """``dst = op(data * scale + bias)``."""
    return _engine.activation(
        op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, dst=dst
    )


def tensor_tensor(
    dst: Tensor, data1: Tensor, data2: Tensor, op: Any, engine: Any = None, **_: Any
) -> Tensor:
    """``dst = op(data1, data2)``."""
    return _engine.tensor_tensor(data1, data2, op, engine=engine, dst=dst)


def tensor_scalar(
    dst: Tensor,
    data: Tensor,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = None,
    **_: Any,
) -> Tensor:
    """``dst = (data op0 operand0) op1 operand1``."""
    return _engine.tensor_scalar(
        data, op0, operand0, reverse0, op1, operand1, reverse1, engine=engine, dst=dst
    )


def tensor_reduce(
    dst: Tensor,
    op: Any,
    data: Tensor,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    **_: Any,
) -> Tensor:
    """``dst = reduce(op, data, axis)``."""
    return _engine.tensor_reduce(op, data, axis, negate=negate, keepdims=keepdims, dst=dst)


def tensor_copy(dst: Tensor, src: Tensor, engine: Any = None, **_: Any) -> Tensor:
    """``dst = src`` on an engine."""
    return _engine.tensor_copy(src, engine=engine, dst=dst)


def reciprocal(dst: Tensor, data: Tensor, **_: Any) -> Tensor:
    """``dst = 1 / data``."""
    return _engine.activation("reciprocal", data, dst=dst, name="nisa.reciprocal")


def memset(dst: Tensor, value: Any, engine: Any = None, **_: Any) -> Tensor:
    """Fill ``dst`` with ``value``."""
    return _engine.memset(None, value, dst.dtype, dst=dst)


def _pattern_values(dst: Tensor, pattern: Any, offset: int, channel_multiplier: int) -> np.ndarray:
    """``offset + p*channel_multiplier + Σ step_k*i_k`` over a [[step, num], ...] pattern."""
    p = dst.partitions
    values = np.full((p, 1), offset, dtype=np.int64) + channel_multiplier * np.arange(p)[:, None]
    free = np.zeros((1,), dtype=np.int64)
    for step, num in pattern:
        free = (free[:, None] + step * np.arange(num)[None, :]).reshape(-1)
    values = values + free[None, :]
    if values.size != dst.size:
        raise NkiConstraintError(
            "err_shape_mismatch",
            f"pattern {pattern} produces {values.shape[1]} elements per partition, dst has "
            f"{dst.free_size}",
        )
    return values.reshape(dst.shape)


def iota(
    dst: Tensor, pattern: Any, offset: int = 0, channel_multiplier: int = 0, **_: Any
) -> Tensor:
    """Affine index values into ``dst`` (int32 math, then cast)."""
    values = _pattern_values(dst, pattern, offset, channel_multiplier)
    return _engine.iota_values(values, dst.dtype, None, dst)


def affine_select(
    dst: Tensor,
    pattern: Any,
    channel_multiplier: int,
    on_true_tile: Tensor,
    on_false_value: float,
    cmp_op: Any = None,
    offset: int = 0,
    **_: Any,
) -> Tensor:
    """``dst = where(cmp_op(affine_value, 0), on_true_tile, on_false_value)``."""
    name = resolve(cmp_op, "nisa.affine_select") if cmp_op is not None else "equal"
    affine = _pattern_values(dst, pattern, offset, channel_multiplier)
    pred = BINARY[name][0](affine, 0)
    return _engine.select_values(pred, on_true_tile, on_false_value, None, None, dst)


def dma_copy(dst: Tensor, src: Tensor, **_: Any) -> None:
    """DMA ``src`` into ``dst``."""
    _engine.dma_copy(dst, src)


def bn_stats(dst: Tensor, data: Tensor, **_: Any) -> Tensor:
    """Batch-norm statistics into ``dst`` (P, 6)."""
    return _engine.bn_stats(data, dst=dst)


def bn_aggr(dst: Tensor, data: Tensor, **_: Any) -> Tensor:
    """Aggregated (mean, variance) into ``dst`` (P, 2)."""
    return _engine.bn_aggr(data, dst=dst)


def tensor_tensor_scan(
    dst: Tensor, data0: Tensor, data1: Tensor, initial: Any, op0: Any, op1: Any, **_: Any
) -> Tensor:
    """``dst[i] = op1(op0(data0[i], dst[i-1]), data1[i])`` per partition."""
    return _engine.tensor_tensor_scan(data0, data1, initial, op0, op1, dst=dst)


def scalar_tensor_tensor(
    dst: Tensor, data: Tensor, op0: Any, operand0: Any, op1: Any, operand1: Tensor, **_: Any
) -> Tensor:
    """``dst = (data op0 operand0) op1 operand1``."""
    return _engine.scalar_tensor_tensor(data, op0, operand0, op1, operand1, dst=dst)


def tensor_partition_reduce(dst: Tensor, op: Any, data: Tensor, **_: Any) -> Tensor:
    """``dst (1, F) = reduce over partitions of data``."""
    return _engine.tensor_partition_reduce(op, data, dst=dst)


def tensor_scalar_reduce(
    dst: Tensor,
    data: Tensor,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Tensor,
    reverse0: bool = False,
    **_: Any,
) -> Tensor:
    """``dst = data op0 operand0`` and ``reduce_res = reduce_op over the free axes of dst``."""
    return _engine.tensor_scalar_reduce(
        data, op0, operand0, reduce_op, reduce_res, reverse0=reverse0, dst=dst
    )


def dma_transpose(dst: Tensor, src: Tensor, axes: Any = None, **_: Any) -> Tensor:
    """2-D transpose by DMA into ``dst``."""
    return _engine.dma_transpose(src, axes=axes, dst=dst)


def __getattr__(name: str) -> Any:
    """Unknown ``nisa`` names fail loudly."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise unsupported(f"nki.isa.{name}")
