"""Memory spaces and allocations: ``Buffer`` kinds and the ``Storage`` behind every tensor.

Storage carries the shadows the checks use: ``valid`` (initialised elements), ``stamps``
(affine-loop writer per element) and capacity accounting released by a finalizer when the
allocation dies (``__del__``).

Both shadows start in a compact form. A fresh uninitialised allocation (``lazy``) keeps the
list of disjoint rectangles written so far (``boxes``) instead of a poisoned copy and a
validity array: its memory outside the boxes is unspecified until ``settle`` writes the poison
value there and builds the validity array. That happens on the first access the rectangles
cannot answer (a masked or partial write, a read not inside one written rectangle, any use of
``valid``), so every check sees exactly the state the eager form would hold; a storage whose
rectangles cover it becomes fully valid without ever materialising anything. Likewise the
affine stamps of writes to rectangles are kept as (rectangle, key) pairs (``stamp_boxes``)
until a masked or overlapping access needs the per-element array.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import numpy as np

from .checks import check_partitions, pmax
from .dtypes import to_f32
from .errors import NkiConstraintError, SourceLocation
from .run import Run, maybe_current_run

_UIDS = itertools.count(1)  # unique allocation ids; not run state

Box = tuple[tuple[int, int], ...]  # (start, stop) per storage axis, step 1
MAX_BOXES = 128  # beyond this many rectangles the array form is cheaper


def key_box(key: tuple[Any, ...]) -> Box | None:
    """The rectangle a basic index key selects, or None (steps, index arrays)."""
    box = []
    for k in key:
        if type(k) is slice:
            if k.step != 1 or k.start is None or k.stop is None:
                return None
            box.append((k.start, k.stop))
        elif isinstance(k, int | np.integer):
            box.append((int(k), int(k) + 1))
        else:
            return None
    return tuple(box)


def box_size(box: Box) -> int:
    """Elements in a rectangle."""
    n = 1
    for start, stop in box:
        n *= max(stop - start, 0)
    return n


def overlaps(a: Box, b: Box) -> bool:
    """True when two rectangles share an element (an empty one shares none)."""
    for (s0, e0), (s1, e1) in zip(a, b, strict=True):
        if s0 >= e1 or s1 >= e0 or s0 >= e0 or s1 >= e1:
            return False
    return True


def contains(outer: Box, inner: Box) -> bool:
    """True when ``inner`` lies inside ``outer``."""
    return all(s0 <= s1 and e1 <= e0 for (s0, e0), (s1, e1) in zip(outer, inner, strict=True))


def box_slices(box: Box) -> tuple[slice, ...]:
    """The index key of a rectangle."""
    return tuple(slice(start, stop) for start, stop in box)


class Buffer(StrEnum):
    """Memory spaces (nki-facts §3.1); ``hbm`` is legacy private HBM."""

    SBUF = "sbuf"
    PSUM = "psum"
    HBM = "hbm"
    SHARED_HBM = "shared_hbm"
    PRIVATE_HBM = "private_hbm"

    # Plain member attributes (set below), not properties: they are read on every access.
    is_hbm: bool  # True for the three HBM flavours
    on_chip: bool  # True for SBUF and PSUM, whose first (partition) axis is limited to 128
    tile_label: str  # "sbuf tile" ...: names an allocation in constraint messages


for _buffer in Buffer:
    _buffer.is_hbm = _buffer in (Buffer.HBM, Buffer.SHARED_HBM, Buffer.PRIVATE_HBM)
    _buffer.on_chip = not _buffer.is_hbm
    _buffer.tile_label = f"{_buffer.value} tile"


class Storage:
    """One allocation (or an alias of one after ``reshape``)."""

    __slots__ = (
        "_data",
        "pending",
        "_valid",
        "boxes",
        "covered",
        "fill",
        "stamps",
        "stamp_boxes",
        "buffer",
        "pdim",
        "name",
        "alloc_depth",
        "dirty",
        "mm_open",
        "origin",
        "uid",
        "borrowed",
        "borrowers",
        "lender",
        "widened",
        "release",
        "__weakref__",
    )

    def __init__(
        self,
        data: np.ndarray,
        buffer: Buffer,
        *,
        valid: np.ndarray | None = None,
        pdim: int = 0,
        name: str = "",
        run: Run | None = None,
        account: bool = True,
    ) -> None:
        # (Run.release_sbuf or release_psum, amount): called once when this storage dies.
        self.release: tuple[Callable[[int], None], int] | None = None
        self._data = data
        # TensorE products not yet computed (``Deferred``); ``data`` computes them first.
        self.pending: list[Deferred] | None = None
        self._valid = valid  # None means "every element is initialised"
        # Lazy (see module docstring): written rectangles, their element count and the value
        # unwritten elements hold (poison, or 0 with uninit="zero"); boxes None: not lazy.
        self.boxes: list[Box] | None = None
        self.covered = 0
        self.fill: np.ndarray | None = None
        self.stamp_boxes: list[tuple[Box, int]] | None = None
        # Identity for the cost model's dependency schedule (ids of dead objects are reused).
        self.uid = next(_UIDS)
        # Copy on write. A borrowed storage holds a read-only view of memory it does not own
        # (a caller's array for kernel arguments, an HBM region for a loaded tile) and copies
        # it before its first write (``own``). A storage whose memory is lent out makes its
        # borrowers copy before it is written (``before_write``). Aliases share the list.
        self.borrowed = False
        self.borrowers: list[weakref.ref[Storage]] | None = None
        # A borrowed tile also remembers (lending storage, index key) so engines can read a
        # bf16 source through the lender's fp32 widening, computed once (``widened_f32``).
        self.lender: tuple[Storage, tuple[Any, ...]] | None = None
        self.widened: np.ndarray | None = None
        self.stamps: np.ndarray | None = None
        self.buffer = buffer
        self.pdim = pdim
        self.name = name
        self.alloc_depth = len(run.affine_stack) if run is not None else 0
        self.dirty = False
        self.mm_open = False  # an accumulation group is open (see isa nc_matmul accumulate)
        self.origin: SourceLocation | None = None  # kernel line that allocated it (HBM outputs)
        if buffer.on_chip:
            shape = data.shape
            if shape and shape[pdim] > (run.hw.pmax if run is not None else pmax()):
                check_partitions(shape, pdim, buffer.tile_label)  # the target's limit; raises
            if run is not None and account:
                self._account(run)

    @property
    def data(self) -> np.ndarray:
        """The element array; deferred products are added into it before anyone sees it."""
        if self.pending is not None:
            self.compute_pending()
        return self._data

    @data.setter
    def data(self, value: np.ndarray) -> None:
        if self.pending is not None:
            self.compute_pending()
        self._data = value

    def defer(self, work: Deferred) -> None:
        """Queue a product to be written (``work.accumulate`` False) or added into ``work.key``;
        consecutive additions into one key join the last entry, one BLAS call later."""
        pending = self.pending
        if pending is None:
            self.pending = [work]
            run = maybe_current_run()
            if run is None:
                self.compute_pending()  # no launch to hold the queue: computed at once
            else:
                run.deferred.append(weakref.ref(self))
            return
        last = pending[-1]
        if work.accumulate and last.accumulate and last.key == work.key:
            last.stationary.extend(work.stationary)
            last.moving.extend(work.moving)
            last.blocks[0].extend(work.blocks[0])
            last.blocks[1].extend(work.blocks[1])
        else:
            pending.append(work)

    def compute_pending(self) -> None:
        """Run the queued products into the array, in order."""
        pending, self.pending = self.pending, None
        for work in pending or ():
            work.apply(self._data)

    @classmethod
    def lazy(
        cls, shape: tuple[int, ...], dtype: np.dtype, fill: Any, buffer: Buffer, **kw: Any
    ) -> Storage:
        """An uninitialised allocation: nothing written, memory filled with ``fill`` on demand."""
        storage = cls(np.empty(shape, dtype=dtype), buffer, valid=None, **kw)
        storage.fill = np.full((), fill, dtype=dtype)
        storage.boxes = []
        return storage

    @property
    def valid(self) -> np.ndarray | None:
        """Per-element initialised flags (None: every element); materialises a lazy storage."""
        if self.boxes is not None:
            self.settle()
        return self._valid

    @valid.setter
    def valid(self, value: np.ndarray | None) -> None:
        if self.boxes is not None:
            self.settle()
        self._valid = value

    def settle(self) -> None:
        """Leave the lazy form: poison the unwritten memory and build the validity array."""
        boxes, self.boxes = self.boxes, None
        if boxes is None:
            return
        valid = np.zeros(self.data.shape, dtype=bool)
        for box in boxes:
            valid[box_slices(box)] = True
        if boxes:
            np.copyto(self.data, self.fill, where=~valid)
        else:
            self.data.fill(self.fill)
        self._valid = valid

    def note_written(self, box: Box) -> bool:
        """Lazy form: record a write of valid values to ``box``; False if it needs the array."""
        boxes = self.boxes
        assert boxes is not None
        size = box_size(box)
        if size == 0:
            return True
        kept = []
        first, stop = box[0] if box else (0, 1)
        for old in boxes:
            if old and (old[0][0] >= stop or first >= old[0][1]):
                kept.append(old)  # disjoint on the first axis (the common case: tiles)
            elif not overlaps(old, box):
                kept.append(old)
            elif contains(box, old):
                self.covered -= box_size(old)  # rewritten whole
            else:
                return False  # partial overlap: the array form tracks it
        if len(kept) >= MAX_BOXES:
            return False
        kept.append(box)
        self.covered += size
        if self.covered == self.data.size:
            self.boxes = None  # every element written: fully valid, nothing to materialise
            self._valid = None
        else:
            self.boxes = kept
        return True

    def box_valid(self, box: Box) -> bool:
        """Lazy form: True when every element of ``box`` has been written (one rectangle)."""
        assert self.boxes is not None
        if box_size(box) == 0:
            return True
        return any(contains(old, box) for old in self.boxes)

    def own(self) -> None:
        """Replace a borrowed (read-only) view by a private contiguous copy."""
        if self.borrowed:
            self.data = np.array(self.data, copy=True, order="C")
            self.borrowed = False
            self.lender = None

    def shared_borrowers(self) -> list[weakref.ref[Storage]]:
        """The list of storages viewing this memory (created on demand, shared by aliases)."""
        if self.borrowers is None:
            self.borrowers = []
        return self.borrowers

    def lend(self, borrower: Storage) -> None:
        """Record that ``borrower`` holds a read-only view of this storage's memory."""
        borrower.borrowed = True
        self.shared_borrowers().append(weakref.ref(borrower))

    def before_write(self) -> None:
        """Own this memory and detach every borrower before it changes."""
        run = maybe_current_run()
        if run is not None and run.deferred:
            compute_deferred(run)  # queued products may read this memory: compute them first
        self.own()
        self.widened = None
        if self.borrowers:
            for ref in self.borrowers:
                borrower = ref()
                if borrower is not None:
                    borrower.own()
            self.borrowers.clear()

    def widened_f32(self, key: tuple[Any, ...]) -> np.ndarray | None:
        """fp32 values of a borrowed bf16 tile, sliced from its lender's one-time widening
        (the same HBM tile is typically loaded once per output tile that needs it); None when
        there is no fully initialised lender to widen."""
        if self.lender is None:
            return None
        source, lent_key = self.lender
        if source.boxes is not None or source._valid is not None:
            return None
        if source.widened is None:
            widened = to_f32(source.data)
            widened.flags.writeable = False
            source.widened = widened
        return source.widened[lent_key][key]

    def _account(self, run: Run) -> None:
        """Charge live SBUF bytes / PSUM banks to the run until this storage dies."""
        data = self._data
        shape = data.shape
        if self.pdim == 0 and shape and shape[0]:
            blocks, free_bytes = 1, data.nbytes // shape[0]  # the usual tile, partitions first
        else:
            blocks = math.prod(shape[: self.pdim])
            free_bytes = math.prod(shape[self.pdim + 1 :]) * data.itemsize
        if self.buffer is Buffer.PSUM:
            bank = run.hw.psum_bank_bytes
            if free_bytes > bank:
                raise NkiConstraintError(
                    "err_psum_tile_exceeds_bank",
                    f"PSUM tile {shape} needs {free_bytes} bytes per partition but a PSUM tile "
                    f"must fit one {bank}-byte bank ({bank // 4} fp32 elements, "
                    "nl.tile_size.psum_fmax); split the free dimension",
                )
            run.allocate_psum(blocks)
            self.release = (run.release_psum, blocks)
        else:
            run.allocate_sbuf(blocks * free_bytes)
            self.release = (run.release_sbuf, blocks * free_bytes)

    def __del__(self) -> None:
        # Cheaper than a weakref.finalize per tile; runs exactly once, when the storage dies.
        release = self.release
        if release is not None:
            self.release = None
            release[0](release[1])


# -- deferred TensorE products ----------------------------------------------------------------
# ``psum += nl.matmul(x, y)`` over the K tiles of a loop is the hot loop of every GEMM kernel.
# Instead of one BLAS call, one temporary PSUM result and one addition per K tile, the product
# is queued on the PSUM storage and computed when anything reads that storage. Consecutive
# K tiles that are adjacent row blocks of one array (tiles loaded from one HBM tensor) become a
# single BLAS call over the whole K range, without copying. Operands are views of the memory
# they were read from, so *any* storage write computes every queued product first
# (``Storage.before_write``): a queued product always sees its operands as they were. The
# queue belongs to the launch (``Run.deferred``): launches in other threads never compute, or
# race to compute, each other's products.


def compute_deferred(run: Run) -> None:
    """Compute every product queued in ``run`` (before a write, and at the end of a launch)."""
    queue = run.deferred
    while queue:
        storage = queue.pop()()
        if storage is not None and storage.pending is not None:
            storage.compute_pending()


# Where a 2-D fp32 operand lies in the memory of the HBM tensor it was loaded from: (that
# array, first row, stop row, (first column, columns, column step)). See ``row_block``.
RowBlock = tuple[np.ndarray, int, int, tuple[int, int, int]]


def row_block(storage: Storage, key: tuple[Any, ...], values: np.ndarray) -> RowBlock | None:
    """The ``RowBlock`` of ``values``, the fp32 operand an engine read from ``storage`` at
    ``key``, when the storage is a loaded tile that still views its source (``lender``) and
    ``values`` is a view of that source's memory (or of its fp32 widening); else None.

    Computed from the index keys, not from data addresses (numpy exposes those only through
    ``__array_interface__``, which builds a dict per call)."""
    lender = storage.lender
    if lender is None or values.ndim != 2 or len(key) != 2:
        return None
    source, lent = lender
    if len(lent) != 2 or type(lent[0]) is not slice or type(lent[1]) is not slice:
        return None
    whole = source._data if values.dtype == source._data.dtype else source.widened
    if whole is None or values.base is not (whole if whole.base is None else whole.base):
        return None  # e.g. a fresh fp32 copy of fp16 values
    (rows, cols), (k_rows, k_cols) = lent, key
    if rows.step != 1 or k_rows.step != 1:
        return None
    first_col = cols.start + k_cols.start * cols.step
    return (
        whole,
        rows.start + k_rows.start,
        rows.start + k_rows.start + values.shape[0],
        (first_col, values.shape[1], cols.step * k_cols.step),
    )


def _stacked(parts: list[np.ndarray], blocks: list[RowBlock | None]) -> np.ndarray:
    """Row blocks stacked along axis 0: a view when they are consecutive rows of one array
    (K tiles loaded in order from one HBM tensor), else a copy."""
    if len(parts) == 1:
        return parts[0]
    first = blocks[0]
    if first is not None:
        whole, row0, row, cols = first
        for block in blocks[1:]:
            if block is None or block[0] is not whole or block[1] != row or block[3] != cols:
                break
            row = block[2]
        else:
            col0, count, step = cols
            view = whole[row0:row, col0 : col0 + count * step : step]
            view.flags.writeable = False
            return view
    return np.concatenate(parts, axis=0)


class Deferred:
    """``sum_i stationary[i].T @ moving[i]`` (fp32 [K, M] and [K, N] operands) to be written to,
    or added into, ``key`` of a storage."""

    __slots__ = ("key", "accumulate", "stationary", "moving", "blocks", "product")

    def __init__(
        self,
        key: tuple[Any, ...],
        accumulate: bool,
        stationary: np.ndarray,
        moving: np.ndarray,
        blocks: tuple[RowBlock | None, RowBlock | None],
        product: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ) -> None:
        self.key, self.accumulate = key, accumulate
        self.stationary, self.moving = [stationary], [moving]
        # Per operand: its RowBlock (None: unknown), to stack adjacent K tiles as one view.
        self.blocks = ([blocks[0]], [blocks[1]])
        self.product = product  # one TensorE product with the emulator's overflow rules

    def apply(self, data: np.ndarray) -> None:
        target = data[self.key]
        if not self.accumulate:
            target[...] = self.product(self.stationary[0], self.moving[0])
            return
        # One fp32 product over all K tiles, then one fp32 addition: the same fp32
        # accumulation as tile by tile, in another (equally unspecified) order.
        total = self.product(
            _stacked(self.stationary, self.blocks[0]), _stacked(self.moving, self.blocks[1])
        )
        with np.errstate(all="ignore"):
            target += total
