"""Legacy ``neuronxcc.nki.isa`` dialect: instructions return new tiles and accept ``mask=``.

Each function forwards to one ``IsaEngine`` method (see isa.py for semantics and checks).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import unsupported
from .isa import engine as _engine
from .isa_common import engine_kind as engine
from .isa_common import get_nc_version, nc_version, reduce_cmd  # noqa: F401 - nisa surface
from .tensor import Buffer, Tensor

tensor_engine, scalar_engine, gpsimd_engine = engine.tensor, engine.scalar, engine.gpsimd
vector_engine, unknown_engine = engine.vector, engine.unknown


def nc_matmul(stationary: Tensor, moving: Tensor, *, mask: Any = None, **_: Any) -> Tensor:
    """``stationary.T @ moving`` into a new fp32 PSUM tile; accumulate with ``psum += ...``."""
    return _engine.nc_matmul(stationary, moving, mask=mask)


def nc_transpose(
    data: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = None, **_: Any
) -> Tensor:
    """Partition↔free transpose (TensorE into PSUM by default)."""
    return _engine.nc_transpose(data, dtype=dtype, mask=mask, engine=engine)


def activation(
    op: Any,
    data: Tensor,
    *,
    bias: Any = None,
    scale: Any = 1.0,
    mask: Any = None,
    dtype: Any = None,
    reduce_op: Any = None,
    reduce_res: Tensor | None = None,
    **_: Any,
) -> Tensor:
    """``op(data * scale + bias)`` on ScalarE."""
    return _engine.activation(
        op,
        data,
        bias=bias,
        scale=scale,
        dtype=dtype,
        mask=mask,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
    )


def activation_reduce(
    op: Any,
    data: Tensor,
    *,
    reduce_op: Any,
    reduce_res: Tensor,
    bias: Any = None,
    scale: Any = 1.0,
    mask: Any = None,
    dtype: Any = None,
    **_: Any,
) -> Tensor:
    """Activation plus a free-axis add-reduction written to ``reduce_res``."""
    return _engine.activation(
        op,
        data,
        bias=bias,
        scale=scale,
        dtype=dtype,
        mask=mask,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
        name="nisa.activation_reduce",
    )


def tensor_tensor(
    data1: Tensor,
    data2: Tensor,
    op: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    engine: Any = None,
    **_: Any,
) -> Tensor:
    """Elementwise ``op(data1, data2)``."""
    return _engine.tensor_tensor(data1, data2, op, dtype=dtype, mask=mask, engine=engine)


def tensor_scalar(
    data: Tensor,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    *,
    dtype: Any = None,
    mask: Any = None,
    engine: Any = None,
    **_: Any,
) -> Tensor:
    """``(data op0 operand0) op1 operand1``."""
    return _engine.tensor_scalar(
        data,
        op0,
        operand0,
        reverse0,
        op1,
        operand1,
        reverse1,
        dtype=dtype,
        mask=mask,
        engine=engine,
    )


def tensor_reduce(
    op: Any,
    data: Tensor,
    axis: Any,
    *,
    mask: Any = None,
    dtype: Any = None,
    negate: bool = False,
    keepdims: bool = False,
    **_: Any,
) -> Tensor:
    """Reduce over free axes."""
    return _engine.tensor_reduce(
        op, data, axis, dtype=dtype, mask=mask, negate=negate, keepdims=keepdims
    )


def tensor_copy(
    src: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = None, **_: Any
) -> Tensor:
    """On-chip copy into a new SBUF tile."""
    return _engine.tensor_copy(src, dtype=dtype, mask=mask, engine=engine)


def reciprocal(data: Tensor, *, dtype: Any = None, mask: Any = None, **_: Any) -> Tensor:
    """``1 / data`` on VectorE."""
    return _engine.activation("reciprocal", data, dtype=dtype, mask=mask, name="nisa.reciprocal")


def iota(expr: Any, dtype: Any, *, mask: Any = None, **_: Any) -> Tensor:
    """Tile of the values of an ``nl.arange`` index expression."""
    values = np.asarray(expr)
    values = values if values.ndim >= 2 else values.reshape(-1, 1)
    return _engine.iota_values(values, dtype, mask, None)


def memset(shape: Any, value: Any, dtype: Any, *, mask: Any = None, **_: Any) -> Tensor:
    """New tile filled with ``value``."""
    return _engine.memset(shape, value, dtype, mask=mask)


def affine_select(
    pred: Any,
    on_true_tile: Tensor,
    on_false_value: float,
    *,
    mask: Any = None,
    dtype: Any = None,
    **_: Any,
) -> Tensor:
    """``where(pred, on_true_tile, on_false_value)`` with an arange predicate.

    GpSimd cannot read PSUM; published legacy kernels (flash attention) still pass a PSUM
    tile, so the legacy compiler stages it through SBUF. We do the same, tracing the copy.
    """
    if isinstance(on_true_tile, Tensor) and on_true_tile.buffer is Buffer.PSUM:
        on_true_tile = _engine.tensor_copy(on_true_tile)
    return _engine.select_values(
        np.asarray(pred, dtype=bool), on_true_tile, on_false_value, dtype, mask, None
    )


def dma_copy(*, dst: Tensor, src: Tensor, mask: Any = None, **_: Any) -> None:
    """DMA ``src`` into ``dst``."""
    _engine.dma_copy(dst, src, mask=mask)


def bn_stats(data: Tensor, *, mask: Any = None, dtype: Any = None, **_: Any) -> Tensor:
    """Batch-norm statistics per partition, shape (P, 6)."""
    return _engine.bn_stats(data, dtype=dtype, mask=mask)


def bn_aggr(data: Tensor, *, mask: Any = None, dtype: Any = None, **_: Any) -> Tensor:
    """Aggregate bn_stats into (mean, variance), shape (P, 2)."""
    return _engine.bn_aggr(data, dtype=dtype, mask=mask)


def tensor_scalar_reduce(
    *,
    data: Tensor,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Tensor,
    reverse0: bool = False,
    dtype: Any = None,
    mask: Any = None,
    **_: Any,
) -> Tensor:
    """``data op0 operand0`` plus its free-axis reduction written into ``reduce_res``."""
    return _engine.tensor_scalar_reduce(
        data, op0, operand0, reduce_op, reduce_res, reverse0=reverse0, dtype=dtype, mask=mask
    )


def dma_transpose(src: Tensor, *, axes: Any = None, mask: Any = None, **_: Any) -> Tensor:
    """2-D transpose by DMA into a new SBUF tile (trn2+; functionally a transpose)."""
    return _engine.dma_transpose(src, axes=axes, mask=mask)


def __getattr__(name: str) -> Any:
    """Unknown ``nisa`` names fail loudly."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise unsupported(f"nki.isa.{name}")


def tensor_tensor_scan(
    data0: Tensor,
    data1: Tensor,
    initial: Any,
    op0: Any,
    op1: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    **_: Any,
) -> Tensor:
    """Per-partition recurrence ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])``."""
    return _engine.tensor_tensor_scan(data0, data1, initial, op0, op1, dtype=dtype, mask=mask)


def scalar_tensor_tensor(
    data: Tensor,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Tensor,
    *,
    dtype: Any = None,
    mask: Any = None,
    **_: Any,
) -> Tensor:
    """``(data op0 operand0) op1 operand1``."""
    return _engine.scalar_tensor_tensor(data, op0, operand0, op1, operand1, dtype=dtype, mask=mask)


def tensor_partition_reduce(
    op: Any, data: Tensor, *, dtype: Any = None, mask: Any = None, **_: Any
) -> Tensor:
    """Reduce across partitions into a (1, F) tile."""
    return _engine.tensor_partition_reduce(op, data, dtype=dtype, mask=mask)
