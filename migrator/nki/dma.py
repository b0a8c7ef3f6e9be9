"""DMA accounting: bytes moved, descriptor count and contiguity of the HBM side.

A descriptor is one contiguous run of HBM bytes (nki-facts §6.3: ≥ 2 KiB contiguous per
partition is efficient). Counting runs from strides keeps this O(rank) for slice views; views
built with ``nl.arange`` use their flat offsets.
"""

from __future__ import annotations

import math

import numpy as np

from .dtypes import name as dtype_name
from .errors import UNKNOWN_LOCATION
from .run import maybe_current_run
from .tensor import Tensor
from .trace import Engine, Instr


def geometry(view: Tensor, mask: np.ndarray | None = None) -> tuple[int, int, int]:
    """(elements moved, descriptors, bytes per descriptor) for an HBM view."""
    data = view._st._data  # not .data: deferred products do not change the geometry
    item = data.itemsize
    if view.advanced:
        idx = view._resolved(mask)  # (each index broadcast to the view's shape already)
        flat = np.ravel_multi_index(idx, view._st.data.shape)
        flat = flat[mask] if mask is not None else flat.ravel()
        if flat.size == 0:
            return 0, 0, 0
        runs = 1 + int(np.count_nonzero(np.diff(flat) != 1))
        return int(flat.size), runs, int(flat.size * item // runs)
    # The view's strides from the storage's and the key's steps (no numpy view is built):
    # walk the axes from the innermost while each continues the contiguous run.
    shape = view.shape
    key = view.key
    base = data.strides
    dims = view._view_dims()  # storage axis of each view axis
    run_elems = 1
    for axis in range(len(shape) - 1, -1, -1):
        n = shape[axis]
        if n == 1:
            continue
        d = dims[axis]
        if base[d] * key[d].step != item * run_elems:
            break
        run_elems *= n
    elems = math.prod(shape) if mask is None else int(np.count_nonzero(mask))
    if elems == 0:
        return 0, 0, 0
    runs = max(1, -(-elems // run_elems))
    return elems, runs, min(run_elems, elems) * item


_DMA_NAMES = {
    "load": "dma_load",
    "store": "dma_store",
    "sbuf_to_sbuf": "dma_sbuf_to_sbuf",
    "atomic_rmw": "dma_atomic_rmw",
}


def record_dma(kind: str, hbm_view: Tensor, tile: Tensor, mask: np.ndarray | None) -> None:
    """Trace one DMA between an HBM view and an on-chip tile ("load" or "store")."""
    run = maybe_current_run()
    if run is None or not run.options.trace:
        return
    elems, runs, contiguous = geometry(hbm_view, mask)
    dtype = hbm_view._st._data.dtype
    nbytes = elems * dtype.itemsize
    run.add(
        Instr(
            _DMA_NAMES[kind],
            Engine.DMA,
            tile.partitions,
            tile.free_size,
            dtype_name(dtype),
            UNKNOWN_LOCATION,  # Run.add sets the kernel line
            bytes=nbytes,
            descriptors=runs,
            contiguous_bytes=contiguous,
            hbm_read=nbytes if kind == "load" else 0,
            hbm_write=nbytes if kind == "store" else 0,
        )
    )


def record_copy(src: Tensor, dst: Tensor, mask: np.ndarray | None) -> None:
    """Trace a generic DMA (nisa.dma_copy); HBM side decides descriptors."""
    if src.buffer.is_hbm:
        record_dma("load", src, dst, mask)
    elif dst.buffer.is_hbm:
        record_dma("store", dst, src, mask)
    else:
        record_dma("sbuf_to_sbuf", src, dst, mask)
