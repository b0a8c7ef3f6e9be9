"""``affine_range`` independence check: is data carried between iterations of a parallel loop?

Violations follow ``EmulatorOptions.affine_deps``: raised by default ("raise"), or appended to
``Run.findings`` and the run continues ("report"), so one run can list every dependency.

Model: each storage keeps, per element, the key (loop instance << 24 | iteration) of the
innermost ``affine_range`` frame that last wrote it (stored as key + 1, so 0 means unwritten);
``Run.affine_parents`` links each loop instance to the frame enclosing it. On a read or
overwrite inside affine loops entered after the storage was allocated, each distinct writer key
is walked outwards to the deepest loop instance it shares with the current loop stack: if the
two sit in different iterations of that loop, the access depends on another iteration (nki-facts
§3.4: err_unexpected_output_dependencies, "unsafe" carried dependency). Accesses in the same
iteration, or outside every loop entered after the allocation, are fine. In-place accumulation
(``+=``, ``-=``, ``*=``, ``/=`` and matmul accumulation into PSUM) is exempt: NKI allows
associative accumulation across iterations.

Writes of whole rectangles keep their stamps as (rectangle, key) pairs on the storage
(``stamp_boxes``); an access then checks the keys of the rectangles it overlaps, which are
exactly the distinct stamps the per-element array would hold there. A masked, index-array or
partially overlapping access first materialises the array (``_materialise``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .run import AffineFrame, Run, maybe_current_run
from .storage import MAX_BOXES, Box, box_size, box_slices, contains, key_box, overlaps

if TYPE_CHECKING:
    from .storage import Storage
    from .tensor import Tensor

_ITER_MASK = (1 << 24) - 1
_INT32_MAX = np.iinfo(np.int32).max


def _relevant(storage: Storage) -> tuple[Run | None, list[AffineFrame]]:
    """Affine frames entered after the storage was allocated (they govern its accesses)."""
    run = maybe_current_run()
    if run is None or len(run.affine_stack) <= storage.alloc_depth:
        return run, []
    return run, run.affine_stack[storage.alloc_depth :]


def _conflict(run: Run, frames: list[AffineFrame], stamps: np.ndarray) -> tuple[int, int] | None:
    """(current iteration, writer iteration) of the loop whose iterations conflict, or None."""
    low = (frames[0].instance << 24) + 1  # stamps hold key + 1 (0: never written)
    # Loop instances only grow, so one max() usually proves "nothing written in these loops".
    if stamps.size == 0 or stamps.max() < low:
        return None
    current = {f.instance: f.iteration for f in frames}
    here = frames[-1].key
    for writer in np.unique(stamps[stamps >= low]):
        key = int(writer) - 1
        if key == here:
            continue
        while key != -1:
            instance, iteration = key >> 24, key & _ITER_MASK
            if instance in current:
                if iteration != current[instance]:
                    return current[instance], iteration
                break
            key = run.affine_parents.get(instance, -1)
    return None


_Scan = tuple[Box, np.ndarray, list[tuple[Box, int]], bool]  # box, keys there, kept, partial


def _materialise(storage: Storage) -> None:
    """Turn (rectangle, key) stamps into the per-element array (0: never written)."""
    boxes, storage.stamp_boxes = storage.stamp_boxes, None
    if boxes is None:
        return
    wide = any(key > _INT32_MAX for _, key in boxes)
    # np.zeros maps fresh zero pages lazily: only the written rectangles cost anything.
    stamps = np.zeros(storage.data.shape, dtype=np.int64 if wide else np.int32)
    for box, key in boxes:
        stamps[box_slices(box)] = key
    storage.stamps = stamps


def alias_stamps(storage: Storage, key: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Writer stamps for a reshaped alias of `storage`: a view of the same per-element array,
    so a write through one reshape is seen by the checks of every other view of that memory
    (each `x.reshape(...)` inside a loop is a new alias)."""
    _materialise(storage)
    if storage.stamps is None:
        storage.stamps = np.zeros(storage.data.shape, dtype=np.int64)  # lazily mapped pages
    elif storage.stamps.dtype != np.int64:
        # widened now, before any alias holds a view (a later widening would detach them)
        storage.stamps = storage.stamps.astype(np.int64)
    return storage.stamps[key].reshape(shape)


def _scan(storage: Storage, idx: Any, mask: np.ndarray | None) -> _Scan | None:
    """One pass over the stamp rectangles for a rectangular access, or None (array form)."""
    boxes = storage.stamp_boxes
    box = key_box(idx) if mask is None and boxes is not None else None
    if box is None or boxes is None:
        return None
    if box_size(box) == 0:
        return box, np.zeros(0, np.int64), boxes, False
    keys, kept, partial = [], [], False
    first, stop = box[0] if box else (0, 1)
    for old in boxes:
        rect = old[0]
        if rect and (rect[0][0] >= stop or first >= rect[0][1]):
            kept.append(old)  # disjoint on the first axis (the common case: tiles)
        elif not overlaps(rect, box):
            kept.append(old)
        else:
            keys.append(old[1])
            partial = partial or not contains(box, rect)
    return box, np.array(keys, np.int64), kept, partial


def _selected(stamps: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return stamps[mask] if mask is not None and stamps.shape == mask.shape else stamps


def _access_keys(storage: Storage, idx: Any, mask: np.ndarray | None) -> tuple[_Scan | None, Any]:
    """The rectangle scan (None once the per-element array exists) and the writer keys of
    the elements an access touches."""
    scan = _scan(storage, idx, mask) if storage.stamps is None else None
    if scan is None:
        _materialise(storage)
        return None, _selected(storage.stamps[idx], mask)
    return scan, scan[1]


def check_affine_read(tensor: Tensor, idx: Any, mask: np.ndarray | None) -> None:
    """Report a read of data that another iteration of an enclosing affine loop wrote."""
    storage = tensor._st
    storage.mm_open = False
    if storage.stamps is None and storage.stamp_boxes is None:
        return
    run, frames = _relevant(storage)
    if run is None or not frames:
        return
    scan, keys = _access_keys(storage, idx, mask)
    hit = _conflict(run, frames, keys)
    if hit is not None:
        run.violation(
            "err_affine_loop_carried_dependency",
            f"iteration {hit[0]} of an nl.affine_range loop reads {_describe(storage)} written "
            f"by iteration {hit[1]}; affine_range iterations must be independent — use "
            "nl.sequential_range for a loop-carried dependency",
            run.options.affine_deps,
        )


def check_affine_write(tensor: Tensor, idx: Any, mask: np.ndarray | None) -> None:
    """Report overwriting data another affine iteration wrote, then stamp this write."""
    storage = tensor._st
    run, frames = _relevant(storage)
    if run is None or not frames:
        return
    if storage.stamps is None and storage.stamp_boxes is None:
        # key + 1 per element, 0 for "never written": rectangles until an access needs the
        # per-element array (int32 until keys outgrow it).
        storage.stamp_boxes = []
    scan, keys = _access_keys(storage, idx, mask)
    hit = _conflict(run, frames, keys)
    if hit is not None:
        run.violation(
            "err_unexpected_output_dependencies",
            f"iteration {hit[0]} of an nl.affine_range loop overwrites {_describe(storage)} "
            f"already written by iteration {hit[1]}; give each iteration its own output region, "
            "allocate the tile inside the loop, or use nl.sequential_range",
            run.options.affine_deps,
        )
    key = frames[-1].key + 1
    if scan is not None:
        box, _, kept, partial = scan
        if box_size(box) == 0:
            return  # an empty write stamps nothing
        if not partial and len(kept) < MAX_BOXES:
            kept.append((box, key))  # rectangles this write covers whole are replaced
            storage.stamp_boxes = kept
            return
    _materialise(storage)
    if key > _INT32_MAX and storage.stamps.dtype != np.int64:
        storage.stamps = storage.stamps.astype(np.int64)  # loop instance ids outgrew int32
    if mask is None:
        storage.stamps[idx] = key
    elif tensor.advanced:
        storage.stamps[tuple(a[mask] for a in idx)] = key
    else:
        np.copyto(storage.stamps[idx], key, where=mask)


def _describe(storage: Storage) -> str:
    name = f" '{storage.name}'" if storage.name else ""
    return f"{storage.buffer.value} tensor{name} of shape {storage.data.shape}"
