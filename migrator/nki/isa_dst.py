"""New standalone ``nki.isa`` dialect: explicit destination first, no masks.

Each function writes its result into ``dst`` through the same ``IsaEngine`` methods the legacy
dialect uses and returns ``dst`` (the real API returns an instruction handle). Signatures
follow the public API (aws-neuron-sdk, ``nki/api/nki/isa``); there is no ``**kwargs``, so an
unknown keyword is a TypeError, and a documented keyword the emulator does not model raises
``NkiNotEmulatedError`` when given a non-default value (see api_params.py). ``name=`` labels
the instruction's trace entries.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import numpy as np

from . import dtypes as _dt
from .errors import NkiConstraintError as _Error
from .errors import not_emulated as _not_emulated
from .errors import unsupported as _unsupported
from .isa import dma_compute as _dma_compute
from .isa import engine as _engine
from .isa_common import dge_mode, get_nc_version, nc_version, oob_mode, reduce_cmd  # noqa: F401
from .isa_common import engine_kind as engine
from .isa_common import labelled as _labelled
from .language import _fit
from .nl_memory import fp32  # noqa: F401 - nisa.fp32.min
from .ops import BINARY as _BINARY
from .ops import resolve as _resolve
from .tensor import Tensor  # noqa: F401 - nki.isa.Tensor (annotations)

_FP32_MIN = float(np.finfo(np.float32).min)


class matmul_perf_mode(Enum):  # noqa: N801 - NKI spelling (nisa.matmul_perf_mode)
    """nc_matmul performance mode: ``double_row`` is the fp8 double-row mode (trn2+)."""

    none = "none"
    double_row = "double_row"


def _into(dst: Tensor, tile: Tensor) -> Tensor:
    """Write a value-returning instruction's result tile into ``dst``."""
    vals, ok = tile.read()
    vals, ok = _fit(vals, ok, dst.shape)
    dst.write(vals, ok)
    return dst


def nc_matmul(
    dst: Tensor,
    stationary: Tensor,
    moving: Tensor,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = matmul_perf_mode.none,
    name: str | None = None,
) -> Tensor:
    """``dst (+)= stationary.T @ moving``; ``accumulate=None``: first write overwrites."""
    with _labelled(name):
        return _engine.nc_matmul(
            stationary, moving, dst=dst, accumulate=accumulate, perf_mode=perf_mode,
            is_stationary_onezero=is_stationary_onezero, is_moving_onezero=is_moving_onezero,
            is_transpose=is_transpose, tile_position=tile_position, tile_size=tile_size,
        )  # fmt: skip


def nc_transpose(
    dst: Tensor, data: Tensor, engine: Any = engine.unknown, name: str | None = None
) -> Tensor:
    """Partition↔free transpose into ``dst``."""
    with _labelled(name):
        return _engine.nc_transpose(data, dst=dst, engine=engine)


def activation(
    dst: Tensor,
    op: Any,
    data: Tensor,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Tensor | None = None,
    reduce_cmd: Any = reduce_cmd.idle,
    name: str | None = None,
) -> Tensor:
    """``dst = op(data * scale + bias)``."""
    with _labelled(name):
        return _engine.activation(
            op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
            dst=dst, reduce_cmd=reduce_cmd,
        )  # fmt: skip


def activation_reduce(
    dst: Tensor,
    op: Any,
    data: Tensor,
    reduce_op: Any,
    reduce_res: Tensor,
    bias: Any = None,
    scale: Any = 1.0,
    name: str | None = None,
) -> Tensor:
    """``dst = op(data * scale + bias)`` and its free-axis sum into ``reduce_res``."""
    with _labelled(name):
        return _engine.activation(
            op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
            dst=dst, name="nisa.activation_reduce",
        )  # fmt: skip


def tensor_tensor(
    dst: Tensor,
    data1: Tensor,
    data2: Tensor,
    op: Any,
    engine: Any = engine.unknown,
    name: str | None = None,
) -> Tensor:
    """``dst = op(data1, data2)``."""
    with _labelled(name):
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
    engine: Any = engine.unknown,
    name: str | None = None,
) -> Tensor:
    """``dst = (data op0 operand0) op1 operand1``."""
    with _labelled(name):
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
    name: str | None = None,
) -> Tensor:
    """``dst = reduce(op, data, axis)``; ``keepdims=True`` needs a dst of data's rank."""
    if keepdims and dst.ndim != getattr(data, "ndim", dst.ndim):
        raise _Error(
            "err_shape_mismatch",
            f"nisa.tensor_reduce: keepdims=True keeps data's rank {data.ndim}, dst has "
            f"{dst.ndim} dims {dst.shape}",
        )
    with _labelled(name):
        return _engine.tensor_reduce(op, data, axis, negate=negate, keepdims=keepdims, dst=dst)


def tensor_copy(
    dst: Tensor,
    src: Tensor,
    engine: Any = engine.unknown,
    name: str | None = None,
    dtype: Any = None,
) -> Tensor:
    """``dst = src`` on an engine. ``dtype`` (accepted by NKI 0.2-era code, e.g. the ported
    matmul tutorial) must be ``dst``'s dtype: the output dtype is the destination's."""
    if dtype is not None and _dt.normalize(dtype) != dst.dtype:
        raise _Error(
            "err_unsupported_dtype",
            f"nisa.tensor_copy: dtype={dtype} differs from dst's dtype {dst.dtype}; the "
            "destination's dtype is the output dtype",
        )
    with _labelled(name):
        return _engine.tensor_copy(src, engine=engine, dst=dst)


def tensor_copy_predicated(
    dst: Tensor,
    src: Any,
    predicate: Tensor,
    reverse_pred: bool = False,
    name: str | None = None,
) -> Tensor:
    """``dst = where(predicate, src, dst)``."""
    with _labelled(name):
        return _engine.tensor_copy_predicated(src, dst, predicate, reverse_pred=reverse_pred)


def reciprocal(dst: Tensor, data: Tensor, name: str | None = None) -> Tensor:
    """``dst = 1 / data``."""
    with _labelled(name):
        return _engine.activation("reciprocal", data, dst=dst, name="nisa.reciprocal")


def memset(
    dst: Tensor, value: Any, engine: Any = engine.unknown, name: str | None = None
) -> Tensor:
    """Fill ``dst`` with ``value``."""
    with _labelled(name):
        return _engine.memset(None, value, dst.dtype, dst=dst, engine=engine)


def _pattern_values(dst: Tensor, pattern: Any, offset: int, channel_multiplier: int) -> np.ndarray:
    """``offset + p*channel_multiplier + Σ step_k*i_k`` over a [[step, num], ...] pattern."""
    p = dst.partitions
    values = np.full((p, 1), offset, dtype=np.int64) + channel_multiplier * np.arange(p)[:, None]
    free = np.zeros((1,), dtype=np.int64)
    for step, num in pattern:
        free = (free[:, None] + step * np.arange(num)[None, :]).reshape(-1)
    values = values + free[None, :]
    if values.size != dst.size:
        raise _Error(
            "err_shape_mismatch",
            f"pattern {pattern} produces {values.shape[1]} elements per partition, dst has "
            f"{dst.free_size}",
        )
    return values.reshape(dst.shape)


def iota(
    dst: Tensor,
    pattern: Any,
    offset: int = 0,
    channel_multiplier: int = 0,
    name: str | None = None,
) -> Tensor:
    """Affine index values into ``dst`` (int32 math, then cast)."""
    with _labelled(name):
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
    name: str | None = None,
) -> Tensor:
    """``dst = where(cmp_op(affine_value, 0), on_true_tile, on_false_value)``."""
    with _labelled(name):
        op = _resolve(cmp_op, "nisa.affine_select") if cmp_op is not None else "equal"
        affine = _pattern_values(dst, pattern, offset, channel_multiplier)
        pred = _BINARY[op][0](affine, 0)
        return _engine.select_values(pred, on_true_tile, on_false_value, None, None, dst)


def dma_copy(
    dst: Tensor,
    src: Tensor,
    priority: Any = None,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
    engine: Any = engine.unknown,
    name: str | None = None,
) -> None:
    """DMA ``src`` into ``dst`` (``oob_mode.skip`` drops out-of-range indirect elements)."""
    _not_emulated(
        "nisa.dma_copy", priority=(priority, None), engine=(getattr(engine, "value", engine), 0)
    )
    with _labelled(name):
        _engine.dma_copy(dst, src, oob_mode=oob_mode, dge_mode=dge_mode)


def dma_compute(
    dst: Tensor,
    srcs: Any,
    reduce_op: Any,
    scales: Any = None,
    unique_indices: bool = True,
    oob_mode: Any = oob_mode.error,
    name: str | None = None,
) -> None:
    """``dst = sum(srcs)`` on the DMA engines; scatter/gather read-modify-write with an
    indirect view (unique indices)."""
    with _labelled(name):
        _dma_compute(
            dst, srcs, reduce_op, scales=scales, unique_indices=unique_indices, oob_mode=oob_mode
        )


def dma_transpose(
    dst: Tensor,
    src: Tensor,
    axes: Any = None,
    priority: Any = None,
    dge_mode: Any = dge_mode.unknown,
    oob_mode: Any = oob_mode.error,
    name: str | None = None,
) -> Tensor:
    """2-D transpose by DMA into ``dst``."""
    _not_emulated(
        "nisa.dma_transpose",
        priority=(priority, None),
        dge_mode=(getattr(dge_mode, "value", dge_mode), 3),
        oob_mode=(getattr(oob_mode, "value", oob_mode), 0),
    )
    with _labelled(name):
        return _engine.dma_transpose(src, axes=axes, dst=dst)


def bn_stats(dst: Tensor, data: Tensor, name: str | None = None) -> Tensor:
    """Batch-norm statistics into ``dst`` (P, 6)."""
    with _labelled(name):
        return _engine.bn_stats(data, dst=dst)


def bn_aggr(dst: Tensor, data: Tensor, name: str | None = None) -> Tensor:
    """Aggregated (mean, variance) into ``dst`` (P, 2)."""
    with _labelled(name):
        return _engine.bn_aggr(data, dst=dst)


def tensor_tensor_scan(
    dst: Tensor,
    data0: Tensor,
    data1: Tensor,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> Tensor:
    """``dst[i] = op1(op0(data0[i], dst[i-1]), data1[i])`` per partition."""
    with _labelled(name):
        return _engine.tensor_tensor_scan(
            data0, data1, initial, op0, op1, reverse0=reverse0, reverse1=reverse1, dst=dst
        )


def scalar_tensor_tensor(
    dst: Tensor,
    data: Tensor,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Tensor,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> Tensor:
    """``dst = (data op0 operand0) op1 operand1``."""
    with _labelled(name):
        return _engine.scalar_tensor_tensor(
            data, op0, operand0, op1, operand1, reverse0=reverse0, reverse1=reverse1, dst=dst
        )


def tensor_partition_reduce(dst: Tensor, op: Any, data: Tensor, name: str | None = None) -> Tensor:
    """``dst (1, F) = reduce over partitions of data``."""
    with _labelled(name):
        return _engine.tensor_partition_reduce(op, data, dst=dst)


def tensor_scalar_reduce(
    dst: Tensor,
    data: Tensor,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Tensor | None = None,
    reverse0: bool = False,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
    name: str | None = None,
) -> Tensor:
    """``dst = data op0 operand0`` and ``reduce_res = reduce_op over the free axes of dst``."""
    _not_emulated(
        "nisa.tensor_scalar_reduce",
        reduce_cmd=(getattr(reduce_cmd, "value", reduce_cmd), 3),
        reduce_init=(reduce_init, None),
        reduce_res_negate=(reduce_res_negate, False),
    )
    if reduce_res is None:
        raise _Error(
            "err_invalid_operand", "nisa.tensor_scalar_reduce: the emulator needs reduce_res"
        )
    with _labelled(name):
        return _engine.tensor_scalar_reduce(
            data, op0, operand0, reduce_op, reduce_res, reverse0=reverse0, dst=dst
        )


def dropout(dst: Tensor, data: Tensor, prob: Any, name: str | None = None) -> Tensor:
    """``dst`` = data with each element zeroed with probability ``prob``."""
    with _labelled(name):
        return _into(dst, _engine.dropout(data, prob, dtype=dst.dtype))


def max8(dst: Tensor, src: Tensor, name: str | None = None) -> Tensor:
    """``dst`` (P, 8) = the 8 largest values per partition, descending."""
    with _labelled(name):
        return _into(dst, _engine.max8(src, dtype=dst.dtype))


def nc_find_index8(dst: Tensor, data: Tensor, vals: Tensor, name: str | None = None) -> Tensor:
    """``dst`` (P, 8) = index of the first occurrence of each value."""
    with _labelled(name):
        return _into(dst, _engine.nc_find_index8(data, vals, dtype=dst.dtype))


def nc_match_replace8(
    dst: Tensor,
    data: Tensor,
    vals: Tensor,
    imm: float,
    dst_idx: Tensor | None = None,
    name: str | None = None,
) -> Tensor:
    """``dst`` = data with the first occurrence of each value replaced by ``imm``."""
    with _labelled(name):
        return _engine.nc_match_replace8(data, vals, imm, dst_idx=dst_idx, dst=dst)


def nc_stream_shuffle(
    dst: Tensor, src: Tensor, shuffle_mask: Any, name: str | None = None
) -> Tensor:
    """Cross-partition move inside 32-partition quadrants (255: partition unchanged)."""
    with _labelled(name):
        return _engine.nc_stream_shuffle(src, dst, shuffle_mask)


def local_gather(
    dst: Tensor,
    src_buffer: Tensor,
    index: Tensor,
    num_elem_per_idx: int = 1,
    num_valid_indices: int | None = None,
    name: str | None = None,
) -> Tensor:
    """GpSimd gather within each 16-partition group into ``dst``."""
    with _labelled(name):
        return _engine.local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices, dst=dst)


def range_select(
    dst: Tensor,
    on_true_tile: Tensor,
    comp_op0: Any,
    comp_op1: Any,
    bound0: Tensor,
    bound1: Tensor,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_res: Tensor | None = None,
    reduce_op: Any = np.maximum,
    range_start: Any = 0,
    on_false_value: Any = _FP32_MIN,
    name: str | None = None,
) -> Tensor:
    """Keep elements whose free index is within the per-partition bounds."""
    with _labelled(name):
        return _engine.range_select(
            on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd,
            reduce_res=reduce_res, reduce_op=reduce_op, range_start=range_start,
            on_false_value=on_false_value, dst=dst,
        )  # fmt: skip


def select_reduce(
    dst: Tensor,
    predicate: Tensor,
    on_true: Tensor,
    on_false: Any,
    reduce_res: Tensor | None = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = np.maximum,
    reverse_pred: bool = False,
    name: str | None = None,
) -> Tensor:
    """``dst = where(predicate, on_true, on_false)`` with an optional max-reduction."""
    with _labelled(name):
        return _engine.select_reduce(
            dst, predicate, on_true, on_false, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
            reduce_op=reduce_op, reverse_pred=reverse_pred,
        )  # fmt: skip


def sequence_bounds(dst: Tensor, segment_ids: Tensor, name: str | None = None) -> Tensor:
    """``dst`` (P, 2, n) = [start, end) of each element's segment (padding 0: [n, -1])."""
    with _labelled(name):
        return _engine.sequence_bounds(segment_ids, dst=dst)


def nc_n_gather(dst: Tensor, data: Tensor, indices: Tensor, name: str | None = None) -> Tensor:
    """``dst`` = per-partition gather from the flattened free axes of ``data`` (GpSimd)."""
    with _labelled(name):
        return _engine.nc_n_gather(dst, data, indices)


def rng(dst: Tensor, engine: Any = engine.vector, name: str | None = None) -> Tensor:
    """Random bits into an integer ``dst`` (run-seeded generator)."""
    with _labelled(name):
        return _engine.rng(dst, engine=engine)


def set_rng_seed(src_seeds: Tensor, name: str | None = None) -> None:
    """Seed the random generator from a [1, 1] 32-bit tile."""
    with _labelled(name):
        _engine.set_rng_seed(src_seeds)


def nonzero_with_count(
    dst: Tensor,
    src: Tensor,
    index_offset: int = 0,
    padding_val: int = -1,
    name: str | None = None,
) -> Tensor:
    """Indices of nonzero elements (+offset), padding, then the count; GpSimd partitions
    0, 16, ..., 112 only."""
    with _labelled(name):
        return _engine.nonzero_with_count(
            dst, src, index_offset=index_offset, padding_val=padding_val
        )


def tensor_scalar_cumulative(
    dst: Tensor,
    src: Tensor,
    op0: Any,
    op1: Any,
    imm0: Any,
    imm1: Any = None,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    name: str | None = None,
) -> Tensor:
    """``dst[i] = reg = op1(op0(src[i], imm0), reg)`` along the free axes."""
    with _labelled(name):
        return _engine.tensor_scalar_cumulative(
            dst, src, op0, op1, imm0, imm1=imm1, reduce_cmd=reduce_cmd
        )


def get_nc_sub_version() -> int:
    """Silicon revision within the generation: the emulated targets are first revisions."""
    return 0


def __getattr__(name: str) -> Any:
    """Unknown ``nisa`` names fail loudly."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _unsupported(f"nki.isa.{name}")
