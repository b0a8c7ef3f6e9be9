"""Legacy ``neuronxcc.nki.isa`` dialect: instructions return new tiles and accept ``mask=``.

Each function forwards to one ``IsaEngine`` method (see isa.py, isa_extra.py, isa_select.py
for semantics and checks). Signatures follow the public API (aws-neuron-sdk v2.26.0): every
keyword is passed on, and there is no ``**kwargs``, so an unknown keyword is a TypeError,
never silently ignored (the table in api_params.py says how each one is handled).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dt
from .errors import NkiConstraintError as _Error
from .errors import unsupported as _unsupported
from .isa import engine as _engine
from .isa_common import dge_mode, get_nc_version, nc_version, oob_mode, reduce_cmd  # noqa: F401
from .isa_common import engine_kind as engine
from .nl_memory import fp32  # noqa: F401 - nisa.fp32.min
from .tensor import Buffer, Tensor

tensor_engine, scalar_engine, gpsimd_engine = engine.tensor, engine.scalar, engine.gpsimd
vector_engine, unknown_engine = engine.vector, engine.unknown
_FP32_MIN = float(np.finfo(np.float32).min)


def nc_matmul(
    stationary: Tensor,
    moving: Tensor,
    *,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    tile_position: Any = (),
    tile_size: Any = (),
    mask: Any = None,
    perf_mode: Any = None,
) -> Tensor:
    """``stationary.T @ moving`` into a new fp32 PSUM tile; accumulate with ``psum += ...``."""
    return _engine.nc_matmul(
        stationary,
        moving,
        mask=mask,
        perf_mode=perf_mode,
        is_stationary_onezero=is_stationary_onezero,
        is_moving_onezero=is_moving_onezero,
        is_transpose=is_transpose,
        tile_position=tile_position,
        tile_size=tile_size,
    )


def nc_transpose(
    data: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown
) -> Tensor:
    """Partition↔free transpose (TensorE into PSUM by default)."""
    return _engine.nc_transpose(data, dtype=dtype, mask=mask, engine=engine)


def activation(
    op: Any,
    data: Tensor,
    *,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Tensor | None = None,
    reduce_cmd: Any = reduce_cmd.idle,
    mask: Any = None,
    dtype: Any = None,
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
        reduce_cmd=reduce_cmd,
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
    engine: Any = engine.unknown,
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
    engine: Any = engine.unknown,
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
) -> Tensor:
    """Reduce over free axes."""
    return _engine.tensor_reduce(
        op, data, axis, dtype=dtype, mask=mask, negate=negate, keepdims=keepdims
    )


def tensor_copy(
    src: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown
) -> Tensor:
    """On-chip copy into a new SBUF tile."""
    return _engine.tensor_copy(src, dtype=dtype, mask=mask, engine=engine)


def tensor_copy_dynamic_src(
    src: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown
) -> Tensor:
    """On-chip copy of ``src`` read at a dynamic (register) offset; ~600-cycle minimum."""
    return _engine.tensor_copy(
        src, dtype=dtype, mask=mask, engine=engine, name="nisa.tensor_copy_dynamic_src"
    )


def tensor_copy_dynamic_dst(
    *,
    dst: Tensor,
    src: Tensor,
    mask: Any = None,
    dtype: Any = None,
    engine: Any = engine.unknown,
) -> Tensor:
    """On-chip copy into ``dst`` indexed at a dynamic (register) offset."""
    return _engine.tensor_copy(
        src, dtype=dtype, mask=mask, engine=engine, dst=dst, name="nisa.tensor_copy_dynamic_dst"
    )


def tensor_copy_predicated(
    *,
    src: Any,
    dst: Tensor,
    predicate: Tensor,
    reverse_pred: bool = False,
    mask: Any = None,
    dtype: Any = None,
) -> Tensor:
    """``dst = where(predicate, src, dst)`` on VectorE."""
    return _engine.tensor_copy_predicated(
        src, dst, predicate, reverse_pred=reverse_pred, mask=mask, dtype=dtype
    )


def reciprocal(data: Tensor, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """``1 / data`` on VectorE."""
    return _engine.activation("reciprocal", data, dtype=dtype, mask=mask, name="nisa.reciprocal")


def iota(expr: Any, dtype: Any, *, mask: Any = None) -> Tensor:
    """Tile of the values of an ``nl.arange`` index expression."""
    values = np.asarray(expr)
    values = values if values.ndim >= 2 else values.reshape(-1, 1)
    return _engine.iota_values(values, dtype, mask, None)


def memset(
    shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = engine.unknown
) -> Tensor:
    """New tile filled with ``value``."""
    return _engine.memset(shape, value, dtype, mask=mask, engine=engine)


def affine_select(
    pred: Any,
    on_true_tile: Tensor,
    on_false_value: float,
    *,
    mask: Any = None,
    dtype: Any = None,
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


def dma_copy(
    *,
    dst: Tensor,
    src: Tensor,
    mask: Any = None,
    dst_rmw_op: Any = None,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
) -> None:
    """DMA ``src`` into ``dst`` (``dst_rmw_op=np.add`` accumulates; ``oob_mode.skip``)."""
    _engine.dma_copy(
        dst, src, mask=mask, dst_rmw_op=dst_rmw_op, oob_mode=oob_mode, dge_mode=dge_mode
    )


def dma_transpose(src: Tensor, *, axes: Any = None, mask: Any = None, dtype: Any = None) -> Tensor:
    """2-D transpose by DMA into a new SBUF tile (trn2+; functionally a transpose)."""
    return _engine.dma_transpose(src, axes=axes, mask=mask, dtype=dtype)


def bn_stats(data: Tensor, *, mask: Any = None, dtype: Any = None) -> Tensor:
    """Batch-norm statistics per partition, shape (P, 6)."""
    return _engine.bn_stats(data, dtype=dtype, mask=mask)


def bn_aggr(data: Tensor, *, mask: Any = None, dtype: Any = None) -> Tensor:
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
) -> Tensor:
    """``data op0 operand0`` plus its free-axis reduction written into ``reduce_res``."""
    return _engine.tensor_scalar_reduce(
        data, op0, operand0, reduce_op, reduce_res, reverse0=reverse0, dtype=dtype, mask=mask
    )


def tensor_tensor_scan(
    data0: Tensor,
    data1: Tensor,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    *,
    dtype: Any = None,
    mask: Any = None,
) -> Tensor:
    """Per-partition recurrence ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])``."""
    return _engine.tensor_tensor_scan(
        data0, data1, initial, op0, op1, reverse0=reverse0, reverse1=reverse1, dtype=dtype,
        mask=mask,
    )  # fmt: skip


def scalar_tensor_tensor(
    data: Tensor,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Tensor,
    *,
    reverse0: bool = False,
    reverse1: bool = False,
    dtype: Any = None,
    mask: Any = None,
) -> Tensor:
    """``(data op0 operand0) op1 operand1``."""
    return _engine.scalar_tensor_tensor(
        data, op0, operand0, op1, operand1, reverse0=reverse0, reverse1=reverse1, dtype=dtype,
        mask=mask,
    )  # fmt: skip


def tensor_partition_reduce(
    op: Any, data: Tensor, *, mask: Any = None, dtype: Any = None
) -> Tensor:
    """Reduce across partitions into a (1, F) tile."""
    return _engine.tensor_partition_reduce(op, data, dtype=dtype, mask=mask)


def dropout(data: Tensor, prob: Any, *, mask: Any = None, dtype: Any = None) -> Tensor:
    """Zero each element with probability ``prob`` (VectorE, run-seeded generator)."""
    return _engine.dropout(data, prob, mask=mask, dtype=dtype)


def max8(*, src: Tensor, mask: Any = None, dtype: Any = None) -> Tensor:
    """The 8 largest values of each partition, descending: (P, 8)."""
    return _engine.max8(src, mask=mask, dtype=dtype)


def nc_find_index8(*, data: Tensor, vals: Tensor, mask: Any = None, dtype: Any = None) -> Tensor:
    """Index of the first occurrence of each of 8 values per partition (uint32 default)."""
    return _engine.nc_find_index8(data, vals, mask=mask, dtype=dtype)


def nc_match_replace8(
    *,
    data: Tensor,
    vals: Tensor,
    imm: Any,
    dst_idx: Tensor | None = None,
    mask: Any = None,
    dtype: Any = None,
) -> Tensor:
    """Replace the first occurrence of each of 8 values with ``imm``; indices to dst_idx."""
    return _engine.nc_match_replace8(data, vals, imm, dst_idx=dst_idx, mask=mask, dtype=dtype)


def nc_stream_shuffle(
    src: Tensor, dst: Tensor, shuffle_mask: Any, *, dtype: Any = None, mask: Any = None
) -> Tensor:
    """Cross-partition move inside 32-partition quadrants (255: partition unchanged)."""
    return _engine.nc_stream_shuffle(src, dst, shuffle_mask, dtype=dtype, mask=mask)


def local_gather(
    src_buffer: Tensor,
    index: Tensor,
    num_elem_per_idx: int = 1,
    num_valid_indices: int | None = None,
    *,
    mask: Any = None,
) -> Tensor:
    """GpSimd gather within each 16-partition group."""
    return _engine.local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices, mask=mask)


def range_select(
    *,
    on_true_tile: Tensor,
    comp_op0: Any,
    comp_op1: Any,
    bound0: Tensor,
    bound1: Tensor,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_res: Tensor | None = None,
    reduce_op: Any = np.amax,
    range_start: Any = 0,
    on_false_value: Any = _FP32_MIN,
    mask: Any = None,
    dtype: Any = None,
) -> Tensor:
    """Keep elements whose free index is within the per-partition bounds (trn2+)."""
    return _engine.range_select(
        on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd,
        reduce_res=reduce_res, reduce_op=reduce_op, range_start=range_start,
        on_false_value=on_false_value, mask=mask, dtype=dtype,
    )  # fmt: skip


def select_reduce(
    *,
    dst: Tensor,
    predicate: Tensor,
    on_true: Tensor,
    on_false: Any,
    reduce_res: Tensor | None = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = np.amax,
    reverse_pred: bool = False,
    mask: Any = None,
    dtype: Any = None,
) -> Tensor:
    """``dst = where(predicate, on_true, on_false)`` with an optional max-reduction."""
    return _engine.select_reduce(
        dst, predicate, on_true, on_false, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
        reduce_op=reduce_op, reverse_pred=reverse_pred, mask=mask, dtype=dtype,
    )  # fmt: skip


def sequence_bounds(*, segment_ids: Tensor, dtype: Any = None) -> Tensor:
    """Per element the [start, end) of its segment; padding id 0 gives [n, -1]."""
    if dtype is not None and _dt.normalize(dtype) not in (_dt.float32, _dt.int32):
        raise _Error(
            "err_unsupported_dtype", "nisa.sequence_bounds: dtype must be float32 or int32"
        )
    return _engine.sequence_bounds(segment_ids, dtype=dtype)


def __getattr__(name: str) -> Any:
    """Unknown ``nisa`` names fail loudly."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _unsupported(f"nki.isa.{name}")
