"""New-dialect access patterns: ``tensor.ap(pattern, offset, scalar_offset, vector_offset, ...)``.

An access pattern reads the tensor's storage as a flat array (nki-facts §3.2, [SDK]
``nki/deep-dives/nki-aps.rst``): element ``(i0, i1, ...)`` of the view is
``flat[offset + Σ step_k · i_k]`` for ``pattern = [[step_0, num_0], [step_1, num_1], ...]``; the
view's shape is ``(num_0, num_1, ...)``. ``.ap()`` addresses the underlying storage, not the
view it is called on; ``offset=None`` keeps the calling view's start element. On-chip tensors
must step whole partitions in the first pair (step = elements per partition).

Dynamic offsets. ``scalar_offset`` (a (1, 1) integer tile) moves the start by
``value · prod(storage.shape[indirect_dim + 1:])``. ``vector_offset`` (a (P, 1) integer tile,
``indirect_dim=0`` only, on an HBM tensor) gives each partition its own row: element
``(i0, ...)`` reads row ``vector_offset[i0]`` instead of stepping by ``i0 · step_0`` — a
gather, or a scatter when written; a row outside the tensor is an error when accessed, or is
skipped by ``oob_mode=skip`` (the gather/scatter examples of ``nisa.dma_copy`` in [SDK]
``nki/api/nki/isa/__init__.py`` use ``pattern=[[F, P], [1, F]]`` this way).

The result is an index view (like one built with ``nl.arange``), so reads, writes, masks and
bounds checks work as for any other view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import NkiConstraintError, NkiIndexError, unsupported

if TYPE_CHECKING:
    from .tensor import Tensor


def _start(t: Tensor) -> int:
    """Flat element offset of a basic view's first element in its storage."""
    if t.advanced:
        raise unsupported("tensor.ap(offset=None) on a view built with nl.arange; pass offset=")
    starts = [k.start if isinstance(k, slice) else int(k) for k in t.key]
    return int(np.ravel_multi_index(starts, t.storage.data.shape)) if starts else 0


def _index_values(tile: Any, role: str) -> np.ndarray:
    from .tensor import Tensor

    if not isinstance(tile, Tensor):
        return np.asarray(tile, dtype=np.int64)
    data, valid = tile.read()
    if data.dtype.kind not in "iu":
        raise NkiConstraintError(
            "err_invalid_index", f"tensor.ap: {role} has dtype {data.dtype}; use an integer dtype"
        )
    if valid is not None:
        raise NkiConstraintError(
            "err_uninitialized_index", f"tensor.ap: {role} holds uninitialised elements"
        )
    return data.astype(np.int64)


def access_pattern(
    t: Tensor,
    pattern: Any,
    offset: int | None = None,
    scalar_offset: Any = None,
    vector_offset: Any = None,
    indirect_dim: int = 0,
    dtype: Any = None,
) -> Tensor:
    """The view ``t.ap(...)`` describes (see module docstring)."""
    from .tensor import Tensor

    if dtype is not None and np.dtype(dtype) != t.dtype:
        raise unsupported("tensor.ap(dtype=...) reinterpreting the element type")
    pairs = [(int(step), int(num)) for step, num in pattern]
    if not pairs or any(num <= 0 for _, num in pairs):
        raise NkiConstraintError(
            "err_shape_mismatch", f"tensor.ap: pattern {pattern!r} needs [step, num] pairs, num > 0"
        )
    if scalar_offset is not None and vector_offset is not None:
        raise NkiConstraintError(
            "err_invalid_operand", "tensor.ap: give scalar_offset or vector_offset, not both"
        )
    storage = t.storage
    shape = storage.data.shape
    per_partition = int(np.prod(shape[1:], dtype=np.int64))
    if storage.buffer.on_chip and pairs[0][0] != per_partition:
        raise NkiConstraintError(
            "err_num_partition_mismatch",
            f"tensor.ap on an on-chip tensor: the first [step, num] must step whole partitions "
            f"(step {per_partition} for storage shape {shape}), got step {pairs[0][0]}",
        )
    base = _start(t) if offset is None else int(offset)
    dims = len(pairs)
    flat: Any = np.int64(base)
    for k, (step, num) in enumerate(pairs):
        axis = np.arange(num, dtype=np.int64).reshape((-1,) + (1,) * (dims - k - 1))
        if k == 0 and vector_offset is not None:
            if indirect_dim != 0:
                raise unsupported("tensor.ap(vector_offset=...) with indirect_dim != 0")
            if not storage.buffer.is_hbm:
                raise NkiConstraintError(
                    "err_unsupported_memory",
                    "tensor.ap(vector_offset=...): the indexed tensor must be in HBM",
                )
            rows = _index_values(vector_offset, "vector_offset").reshape(-1)
            if rows.size != num:
                raise NkiConstraintError(
                    "err_shape_mismatch",
                    f"tensor.ap: vector_offset has {rows.size} entries for {num} rows",
                )
            flat = flat + rows.reshape(axis.shape) * per_partition
        else:
            flat = flat + axis * step
    if scalar_offset is not None:
        value = int(_index_values(scalar_offset, "scalar_offset").reshape(-1)[0])
        flat = flat + value * int(np.prod(shape[indirect_dim + 1 :], dtype=np.int64))
    flat = np.broadcast_to(flat, tuple(num for _, num in pairs))
    if vector_offset is not None:
        # Rows come from data: one outside the tensor is checked when the view is read or
        # written (an IndexError), or dropped there by dma_copy/dma_compute oob_mode=skip.
        row, inner = np.divmod(flat, per_partition)
        rest = np.unravel_index(inner, shape[1:]) if len(shape) > 1 else ()
        return Tensor(storage, (np.asarray(row),) + tuple(np.asarray(i) for i in rest))
    if flat.min() < 0 or flat.max() >= storage.data.size:
        bad = int(flat.max()) if flat.max() >= storage.data.size else int(flat.min())
        raise NkiIndexError(
            f"tensor.ap: element {bad} is outside the storage of {storage.data.size} elements "
            f"(shape {shape})",
        )
    key = tuple(np.asarray(i) for i in np.unravel_index(flat, shape))
    view = Tensor(storage, key)
    return view
