"""Tensor views: the handles every NKI call works on.

A ``Tensor`` is a handle (storage + index key in storage coordinates) that keeps its declared
dtype, buffer and shape; numpy arrays never leak into kernels. Reads return values plus the
validity shadow of the storage (see storage.py); writes round to the declared dtype and go
through the affine-loop dependency checks.
"""

from __future__ import annotations

import contextlib
import math
import sys
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import dtypes
from .affine import alias_stamps, check_affine_read, check_affine_write
from .errors import (
    NkiConstraintError,
    NkiHostComputeError,
    NkiIndexError,
    NkiUnsupportedAttribute,
    kernel_location,
    unsupported,
)
from .run import maybe_current_run
from .storage import Buffer, Deferred, Storage, key_box

__all__ = ["Buffer", "Storage", "Tensor", "guard_host_access", "host_access_guarded"]

Key = tuple[Any, ...]


_GUARDED = [False]  # set for untrusted kernels (the scorer's sandboxed child)


def guard_host_access() -> None:
    """From now on, code outside the emulator cannot reach a tensor's values except through
    NKI instructions (a submitted kernel computing on the host); white-box tests can."""
    _GUARDED[0] = True


def host_access_guarded() -> bool:
    return _GUARDED[0]


def _emulator_only(what: str) -> None:
    """Refuse `what` to a kernel: only the emulator (and the scorer around it) may reach a
    tensor's values outside NKI instructions. The caller's caller is the one asking; its frame
    is looked at only while the guard is on (every emulator instruction passes here)."""
    if not _GUARDED[0]:
        return
    frame = sys._getframe(2)
    if not str(frame.f_globals.get("__name__", "")).startswith("migrator."):
        raise NkiHostComputeError(
            f"{what} is not NKI: a kernel computes with NKI instructions only, never with "
            "the values on the host"
        )


def _norm_slice(s: slice, n: int, dim: int) -> tuple[int, int, int]:
    """Resolve a slice against a dimension of length n, refusing out-of-range bounds.

    numpy clips slices silently; NKI reports an out-of-bound access instead.
    """
    start, stop, step = s.start, s.stop, s.step
    if (
        (start is None or type(start) is int and -n <= start <= n)
        and (stop is None or type(stop) is int and -n <= stop <= n)
        and (step is None or type(step) is int and step > 0)
    ):
        start, stop, step = s.indices(n)  # in range: what follows would compute the same
        return start, max(stop, start), step
    step = 1 if s.step is None else int(s.step)
    if step <= 0:
        raise unsupported("negative or zero slice steps in nki tensor indexing")
    start = 0 if s.start is None else int(s.start)
    stop = n if s.stop is None else int(s.stop)
    start = start + n if start < 0 else start
    stop = stop + n if stop < 0 else stop
    if not (0 <= start <= n and 0 <= stop <= n):
        raise NkiIndexError(
            f"slice {start}:{stop} is outside dimension {dim} of size {n}",
        )
    return start, max(stop, start), step


def _index_expr(x: Any) -> bool:
    """An integer nl.arange/nl.mgrid index expression (a numpy integer array)."""
    return isinstance(x, np.ndarray) and x.dtype.kind in "iu"


def held_dtype(dtype: np.dtype, buffer: Buffer, run: Any) -> np.dtype:
    """The dtype a new tensor's storage has: its declared dtype, except that
    EmulatorOptions(precision="fp32") holds bf16/fp8 tiles in fp32 on chip (the AWS
    simulators' precision for these types, nki-facts §5)."""
    fp32 = run is not None and run.options.precision == "fp32" and buffer.on_chip
    return dtypes.float32 if fp32 and dtype in dtypes.LOW_PRECISION_FLOATS else dtype


def _is_array_index(x: Any) -> bool:
    return isinstance(x, np.ndarray | list) and np.ndim(x) >= 1


# Tiles returned by nl.loop_reduce, waiting to be assigned into their destination:
# tile -> (operator name, the call site's record).
LOOP_REDUCE: weakref.WeakKeyDictionary[Any, tuple[str, dict[str, bool]]] = (
    weakref.WeakKeyDictionary()
)

# shape -> the key selecting a whole storage of that shape (slices are immutable, so shared)
_FULL_KEYS: dict[tuple[int, ...], Key] = {}


class Tensor:
    """A view of a storage: a kernel argument, an SBUF/PSUM tile or a slice of either."""

    __slots__ = ("_st", "key", "shape", "pdim", "advanced", "produced", "_last", "__weakref__")

    def __init__(self, storage: Storage, key: Key | None = None) -> None:
        self._st = storage
        # Elements a masked instruction produced. On hardware `t[...] = nl.load(x, mask=m)`
        # is one instruction writing into t, so t keeps its old values where m is false;
        # assignment honours this instead of copying the result's unwritten elements.
        self.produced: np.ndarray | None = None
        self._last: tuple[Any, tuple[np.ndarray, ...]] | None = None  # _resolved's last answer
        if key is None:
            shape = storage._data.shape  # not .data: that would compute queued products
            key = _FULL_KEYS.get(shape)
            if key is None:
                if len(_FULL_KEYS) > 1024:
                    _FULL_KEYS.clear()
                key = _FULL_KEYS[shape] = tuple([slice(0, n, 1) for n in shape])
            self.key = key
            self.advanced = False
            self.shape = shape  # numpy shapes are tuples of Python ints
            self.pdim = min(storage.pdim, len(shape))
            return
        self.key = key
        self.advanced = any(isinstance(k, np.ndarray) for k in key)
        if self.advanced:
            arrays = [k for k in key if isinstance(k, np.ndarray)]
            self.shape = tuple(int(n) for n in np.broadcast_shapes(*(a.shape for a in arrays)))
            self.pdim = 0
        else:
            self.shape = tuple(len(range(k.start, k.stop, k.step)) for k in key if type(k) is slice)
            self.pdim = sum(1 for k in key[: storage.pdim] if type(k) is slice)

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def allocate(
        cls,
        shape: tuple[int, ...],
        dtype: np.dtype,
        buffer: Buffer,
        *,
        pdim: int = 0,
        name: str = "",
        fill: Any = None,
    ) -> Tensor:
        """A fresh tensor; without ``fill`` it is poisoned (or zeroed) and marked invalid."""
        run = maybe_current_run()
        dtype = held_dtype(dtype, buffer, run)
        if fill is None:
            zero = run is not None and run.options.uninit == "zero"
            # Poison and validity are materialised on demand (storage.py, "lazy").
            storage = Storage.lazy(
                shape,
                dtype,
                0 if zero else dtypes.poison_value(dtype),
                buffer,
                pdim=pdim,
                name=name,
                run=run,
            )
        else:
            if type(fill) is int and fill == 0:
                data = np.zeros(shape, dtype=dtype)  # exact in every dtype; calloc is lazy
            elif dtypes.is_float(dtype):
                data = dtypes.cast(np.full(shape, fill, dtype=np.float32), dtype)
            else:
                data = np.full(shape, fill, dtype=dtype)
            storage = Storage(data, buffer, valid=None, pdim=pdim, name=name, run=run)
        if buffer.is_hbm:
            storage.origin = kernel_location()
        return cls(storage)

    @classmethod
    def from_values(
        cls,
        values: np.ndarray,
        valid: np.ndarray | None,
        dtype: np.dtype,
        buffer: Buffer = Buffer.SBUF,
        mask: np.ndarray | None = None,
        *,
        fresh: bool = False,
    ) -> Tensor:
        """A new tile holding engine results (float32) rounded to ``dtype``."""
        dtype = held_dtype(dtype, buffer, maybe_current_run())
        if mask is not None:
            out = cls.allocate(values.shape, dtype, buffer)
            out.write(values, valid, mask)
            out.produced = np.broadcast_to(mask, values.shape)
            return out
        data = dtypes.cast(values, dtype)
        adopt = fresh and data is values and data.base is None and data.flags.c_contiguous
        # A new tile owns its memory: values may be a view of another storage (same-dtype copy,
        # load), and aliasing it would let later writes to the source change this tile.
        # ``fresh`` values are newly computed arrays nobody else holds: adopted as they are.
        if not adopt and (data is values or data.base is not None or not data.flags.c_contiguous):
            data = np.array(data, order="C", copy=True)
        if valid is not None and valid.all():
            valid = None
        elif valid is not None:
            valid = np.array(np.broadcast_to(valid, data.shape), order="C", copy=True)
        run = maybe_current_run()
        out = cls(Storage(data, buffer, valid=valid, run=run))
        if run is not None:
            run.note_write(out.storage.uid)
        return out

    @classmethod
    def wrap_input(cls, array: np.ndarray, name: str = "") -> Tensor:
        """An HBM kernel argument: a read-only view of a caller's array, copied on first write.

        Non-contiguous arrays are copied up front. The caller's array itself is never written
        during the run; the launch copies a written argument back afterwards.
        """
        if array.flags.c_contiguous:
            data = array.view()
            data.flags.writeable = False
        else:
            data = np.array(array, copy=True, order="C")
        dtypes.normalize(data.dtype)
        storage = Storage(data, Buffer.SHARED_HBM, name=name)
        storage.borrowed = data.base is not None
        return cls(storage)

    @classmethod
    def borrow(cls, view: Tensor, buffer: Buffer) -> Tensor | None:
        """A new tile that reads ``view``'s memory until either side is written (a load with
        no cast and no mask); None when the view cannot be shared (advanced index, poison).
        Sharing reads ``view`` as ``read()`` would: the same affine check and dependency note."""
        source = view.storage
        if view.advanced:
            return None
        if source.boxes is not None:
            box = key_box(view.key)
            if box is None or not source.box_valid(box):
                return None
        elif source.valid is not None and not source.valid[view.key].all():
            return None
        data = source.data[view.key]
        data.flags.writeable = False  # a new view object: the source array stays writeable
        check_affine_read(view, view.key, None)
        run = maybe_current_run()
        storage = Storage(data, buffer, run=run)
        source.lend(storage)
        storage.lender = (source, view.key)
        if run is not None:
            run.note_read(source.uid)
            run.note_write(storage.uid)
        return cls(storage)

    # -- basic properties -----------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        """Declared element type."""
        return self._st._data.dtype  # not .data: that would compute queued products

    @property
    def buffer(self) -> Buffer:
        """Memory space of the underlying storage."""
        return self._st.buffer

    @property
    def ndim(self) -> int:
        """Number of dimensions of the view."""
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def partitions(self) -> int:
        """Partition count of an on-chip tile (size of the partition axis)."""
        return self.shape[self.pdim] if self.shape else 1

    @property
    def free_size(self) -> int:
        """Elements per partition (N of the cost rules)."""
        return math.prod(self.shape) // max(self.partitions, 1)

    @property
    def size(self) -> int:
        """Total number of elements."""
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self.dtype}, buffer={self.buffer.value})"

    def __getattr__(self, name: str) -> Any:
        # Real NKI tensor methods the emulator lacks (e.g. new-dialect .ap(), .view()) must
        # fail loudly, naming the method, instead of an anonymous AttributeError.
        if name.startswith("_"):
            raise AttributeError(name)
        raise NkiUnsupportedAttribute(
            f"nki tensor method .{name}() is not supported by the cuda2nki emulator"
        )

    def __bool__(self) -> bool:
        raise NkiConstraintError(
            "err_ambiguous_tensor_truth_value",
            "a tile has no truth value; use nl.where or a mask= instead of Python if/and/or",
        )

    def __len__(self) -> int:
        return self.shape[0]

    # -- indexing -------------------------------------------------------------------------
    def __getitem__(self, index: Any) -> Tensor:
        key = self.key
        if type(index) is tuple and len(index) == len(key) == len(self.shape):
            # The hot subscript, `t[a:b, c:d]` with in-range int bounds on a view whose axes are
            # all dimensions: composed here directly; anything else takes the general path.
            new_key, counts = [], []
            for base, item, n in zip(key, index, self.shape, strict=True):
                if type(item) is not slice or item.step is not None:
                    break
                start, stop = item.start, item.stop
                if start is None:
                    start = 0
                elif type(start) is not int or not 0 <= start <= n:
                    break
                if stop is None:
                    stop = n
                elif type(stop) is not int or not 0 <= stop <= n:
                    break
                count = stop - start if stop > start else 0
                first = base.start + start * base.step
                new_key.append(slice(first, first + count * base.step, base.step))
                counts.append(count)
            else:
                view = Tensor.__new__(Tensor)
                view._st, view.key, view.produced, view._last = self._st, tuple(new_key), None, None
                view.shape, view.pdim, view.advanced = tuple(counts), self.pdim, False
                return view
        if self.advanced:
            if index is Ellipsis or (type(index) is slice and index == slice(None)):
                return self
            raise unsupported("indexing a tensor view that was itself built with nl.arange")
        index = index if isinstance(index, tuple) else (index,)
        if len(index) <= len(self.shape) and all(type(i) is slice or type(i) is int for i in index):
            # the common subscript (slices and Python ints): nothing to resolve but the view
            return self._basic(index + (slice(None),) * (len(self.shape) - len(index)))
        if any(isinstance(i, Tensor) for i in index):
            index = tuple(self._indirect(i) if isinstance(i, Tensor) else i for i in index)
        if any(i is None for i in index):
            raise unsupported("nki.language indexing with None/newaxis")
        if Ellipsis in [i for i in index if not isinstance(i, np.ndarray)]:
            at = next(n for n, i in enumerate(index) if i is Ellipsis)
            fill = (slice(None),) * (self.ndim - len(index) + 1)
            index = index[:at] + fill + index[at + 1 :]
        if len(index) > self.ndim:
            raise NkiIndexError(
                f"{len(index)} indices for a tensor of rank {self.ndim} (shape {self.shape})",
            )
        index = index + (slice(None),) * (self.ndim - len(index))
        if any(_is_array_index(i) for i in index):
            return self._advanced(index)
        return self._basic(index)

    def dynamic_offset(self) -> int:
        """The value of a one-element on-chip integer tile, used as a dynamic index offset
        (``tensor_copy_dynamic_src``/``_dst``: the offset is a scalar in SBUF)."""
        if self.size != 1 or not self.buffer.on_chip:
            raise NkiConstraintError(
                "err_invalid_index",
                f"a dynamic offset must be a one-element SBUF tile, got shape {self.shape} in "
                f"{self.buffer.value}",
            )
        data, valid = self.read()
        if data.dtype.kind not in "iu":
            raise NkiConstraintError(
                "err_invalid_index", f"dynamic offset tile has dtype {data.dtype}; use integers"
            )
        if valid is not None:
            raise NkiConstraintError(
                "err_uninitialized_index", "the dynamic offset tile is uninitialised"
            )
        return int(np.asarray(data).reshape(-1)[0])

    def _indirect(self, tile: Tensor) -> np.ndarray | int:
        """Index values held in an on-chip integer tile (legacy indirect DMA gather/scatter).

        nki-facts §3.2: an SBUF index tile in the partition position of an HBM access, e.g.
        ``data[idx[i_p, 0], i_f]``; combine it with ``nl.arange`` for the other axes.
        """
        if self.buffer.on_chip and tile.buffer.on_chip and tile.size == 1:
            return tile.dynamic_offset()
        if not self.buffer.is_hbm or not tile.buffer.on_chip:
            raise unsupported("indirect indexing other than an on-chip index tile into HBM")
        data, valid = tile.read()
        if data.dtype.kind not in "iu":
            raise NkiConstraintError(
                "err_invalid_index", f"index tile has dtype {data.dtype}; use an integer dtype"
            )
        if valid is not None:
            raise NkiConstraintError(
                "err_uninitialized_index", "the index tile holds uninitialised elements"
            )
        values = data.astype(np.intp)
        return values.reshape(-1, 1) if values.ndim == 1 else values

    def _view_dims(self) -> Sequence[int]:
        """Storage axes that are still dimensions of this (basic) view, in order."""
        if len(self.key) == len(self.shape):
            return range(len(self.key))  # a key as long as the shape is all slices
        return [d for d, k in enumerate(self.key) if type(k) is slice]

    def _basic(self, index: Key) -> Tensor:
        key = list(self.key)
        on_chip = self.buffer.on_chip
        counts: list[int] = []
        for vdim, (sdim, item) in enumerate(zip(self._view_dims(), index, strict=True)):
            base: slice = key[sdim]
            n = self.shape[vdim]
            if isinstance(item, slice):
                start, stop, step = _norm_slice(item, n, vdim)
                count = len(range(start, stop, step))
                first, stride = base.start + start * base.step, base.step * step
                key[sdim] = slice(first, first + count * stride, stride)
                counts.append(count)
            else:
                i = int(item)
                i = i + n if i < 0 else i
                if not 0 <= i < n:
                    raise NkiIndexError(
                        f"index {int(item)} is outside dimension {vdim} of size {n} "
                        f"(shape {self.shape})",
                    )
                pos = base.start + i * base.step
                # An integer on the partition axis of an on-chip tile keeps it as size 1
                # (nki-facts §3.2): tiles never lose their partition dimension.
                key[sdim] = slice(pos, pos + 1, 1) if on_chip and vdim == self.pdim else pos
        if len(counts) == len(self.shape):
            # Slices only: the same axes stay dimensions, so shape and partition axis follow.
            view = Tensor.__new__(Tensor)
            view._st, view.key, view.produced, view._last = self._st, tuple(key), None, None
            view.shape, view.pdim, view.advanced = tuple(counts), self.pdim, False
            return view
        if on_chip:
            # ...and integers on free axes drop them only while two dimensions remain.
            for sdim in reversed(range(len(key))):
                if sum(type(k) is slice for k in key) >= 2:
                    break
                if type(key[sdim]) is not slice and type(self.key[sdim]) is slice:
                    key[sdim] = slice(key[sdim], key[sdim] + 1, 1)
        return Tensor(self._st, tuple(key))

    def _advanced(self, index: Key) -> Tensor:
        key = list(self.key)
        if any(isinstance(i, slice) and i != slice(None) for i in index):
            raise NkiConstraintError(
                "err_unsupported_mixing_basic_advanced_tensor_indexing",
                "do not mix slices with nl.arange/nl.mgrid indices in one subscript; "
                "express every axis with arange/mgrid (or every axis with slices)",
            )
        for sdim, item in zip(self._view_dims(), index, strict=True):
            base: slice = key[sdim]
            if isinstance(item, slice):
                raise NkiConstraintError(
                    "err_unsupported_mixing_basic_advanced_tensor_indexing",
                    "a bare ':' cannot be combined with nl.arange/nl.mgrid indices; use "
                    "nl.arange for that axis too",
                )
            arr = np.asarray(item)
            if arr.dtype.kind not in "iu":
                raise NkiConstraintError(
                    "err_invalid_index", f"index of dtype {arr.dtype} is not an integer index"
                )
            key[sdim] = (
                base.start + arr.astype(np.intp) * base.step
                if arr.ndim
                else (base.start + int(arr) * base.step)
            )
        return Tensor(self._st, tuple(key))

    # -- raw access (engines use these) -----------------------------------------------------
    def _resolved(self, mask: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """Broadcast index arrays, bounds-checked where the mask is on, 0 where it is off (and
        out of bounds). The last answer is kept: a DMA's read and its accounting ask twice."""
        if self._last is not None and self._last[0] is mask:
            return self._last[1]
        raw = [np.asarray(k) for k in self.key]
        shape = self._st.data.shape
        out = []
        for dim, index in enumerate(raw):
            # (the view's shape is the indices' broadcast shape: one broadcast per axis)
            arr = np.broadcast_to(index, self.shape)
            # bounds of the index as given (an arange column, not the tile it broadcasts to)
            lo, hi = (index.min(), index.max()) if index.size else (0, 0)
            if lo >= 0 and hi < shape[dim]:  # in bounds everywhere: the mask changes nothing
                out.append(arr)
                continue
            live = arr if mask is None else arr[mask]
            if live.size and (live.min() < 0 or live.max() >= shape[dim]):
                bad = int(live.max()) if live.max() >= shape[dim] else int(live.min())
                raise NkiIndexError(
                    f"index {bad} is outside axis {dim} of size {shape[dim]} (tensor shape "
                    f"{shape}); guard ragged tiles with mask=",
                )
            out.append(arr if mask is None else np.where(mask, arr, 0))
        self._last = (mask, tuple(out))
        return self._last[1]

    def _index(self, mask: np.ndarray | None = None) -> Key:
        return self._resolved(mask) if self.advanced else self.key

    @property
    def storage(self) -> Storage:
        """The memory behind the handle: the emulator's, never a kernel's (values flow only
        through NKI instructions, so host-side numpy cannot stand in for them)."""
        _emulator_only("the storage of a tensor")
        return self._st

    def read(self, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Stored values (declared dtype) and the validity mask (None: all valid); emulator
        code only."""
        _emulator_only("Tensor.read()")
        storage = self._st
        if storage.boxes is not None:
            box = None if mask is not None or self.advanced else key_box(self.key)
            if box is None or not storage.box_valid(box):
                storage.settle()  # reads of unwritten memory see the poison value
        idx = self._index(mask)
        data = storage.data[idx]
        valid = None if storage._valid is None else storage._valid[idx]
        if valid is not None and valid.all():
            valid = None
        check_affine_read(self, idx, mask)
        run = maybe_current_run()
        if run is not None:
            run.note_read(self._st.uid)
        return data, valid

    def write(
        self,
        values: np.ndarray,
        valid: np.ndarray | None,
        mask: np.ndarray | None = None,
        *,
        accumulate: bool = False,
    ) -> None:
        """Store float32 (or already typed) values, rounding to the declared dtype; emulator
        code only."""
        _emulator_only("Tensor.write()")
        storage = self._st
        storage.before_write()
        values = dtypes.cast(np.asarray(values), self.dtype)
        if values.shape != self.shape:
            values = np.broadcast_to(values, self.shape)
        if mask is not None:
            mask = np.broadcast_to(np.asarray(mask, dtype=bool), self.shape)
        idx = self._index(mask)
        if not accumulate:
            check_affine_write(self, idx, mask)
        if storage.boxes is not None:
            # Lazy storage: a whole-rectangle write of valid values is recorded as a box.
            box = None if mask is not None or valid is not None else key_box(idx)
            if box is None or not storage.note_written(box):
                storage.settle()
        shadow = storage._valid
        if valid is not None and shadow is None:
            shadow = storage._valid = np.ones(storage.data.shape, dtype=bool)
        if mask is None:
            storage.data[idx] = values
            if shadow is not None:
                shadow[idx] = True if valid is None else valid
        elif self.advanced:
            sel = tuple(a[mask] for a in idx)
            storage.data[sel] = values[mask]
            if shadow is not None:
                shadow[sel] = True if valid is None else np.broadcast_to(valid, mask.shape)[mask]
        else:
            np.copyto(storage.data[idx], values, where=mask)
            if shadow is not None:
                ok = True if valid is None else valid
                np.copyto(shadow[idx], ok, where=mask)
        storage.dirty = True
        run = maybe_current_run()
        if run is not None:
            run.note_write(storage.uid)

    # -- tensor methods (nki-facts §3.9b) -------------------------------------------------
    def reshape(self, shape: Any) -> Tensor:
        """A view with a new shape over the same elements (contiguous views only)."""
        shape = tuple(int(s) for s in (shape if isinstance(shape, tuple | list) else (shape,)))
        if self.advanced:
            raise unsupported("reshape of a tensor view built with nl.arange")
        self._st.own()  # a borrowed view is copied before memory is shared further
        data = self._st.data[self.key]
        if int(np.prod(shape, dtype=np.int64)) != data.size or not data.flags.c_contiguous:
            raise NkiConstraintError(
                "err_invalid_reshape",
                f"cannot reshape a view of shape {self.shape} to {shape}: element counts must "
                "match and the view must be contiguous",
            )
        valid = None if self._st.valid is None else self._st.valid[self.key].reshape(shape)
        alias = Storage(data.reshape(shape), self.buffer, valid=valid, account=False)
        alias.borrowers = self._st.shared_borrowers()  # writes via either side detach them
        alias.uid = self._st.uid  # same memory for the dependency schedule
        # the same affine-loop history: writes through any view are checked against all
        alias.alloc_depth = self._st.alloc_depth
        alias.stamps = alias_stamps(self._st, self.key, shape)
        return Tensor(alias)

    def view(self, dtype: Any) -> Tensor:
        """The same bytes read as another dtype (nki-facts §3.9b): a view sharing memory.

        Same item size keeps the shape; otherwise the last axis scales (numpy ``view``)."""
        dt = dtypes.normalize(dtype)
        if dt == self.dtype:
            return self
        if self.advanced:
            raise unsupported("view(dtype) of a tensor view built with nl.arange")
        self._st.own()
        data = self._st.data[self.key]
        if dt.itemsize != data.dtype.itemsize and not data.flags.c_contiguous:
            raise NkiConstraintError(
                "err_invalid_reshape",
                f"view({dt}) changes the item size, which needs a contiguous view "
                f"(shape {self.shape})",
            )
        try:
            viewed = data.view(dt)
        except ValueError as exc:
            raise NkiConstraintError(
                "err_invalid_reshape", f"cannot view shape {self.shape} as {dt}: {exc}"
            ) from exc
        valid = None
        if self._st.valid is not None:
            ok = self._st.valid[self.key]
            if viewed.shape != ok.shape:  # an element is valid when all its bytes are
                ratio = dt.itemsize / data.dtype.itemsize
                ok = (
                    ok.reshape(*ok.shape[:-1], -1, int(ratio)).all(axis=-1)
                    if ratio > 1
                    else np.repeat(ok, int(round(1 / ratio)), axis=-1)
                )
            valid = np.ascontiguousarray(ok)
        alias = Storage(viewed, self.buffer, valid=valid, account=False)
        alias.borrowers = self._st.shared_borrowers()
        alias.uid = self._st.uid
        return Tensor(alias)

    def astype(self, dtype: Any) -> Tensor:
        """A converted copy (always copies, nki-facts §3.9b)."""
        from . import language

        return language.copy(self, dtype=dtype)

    def broadcast_to(self, shape: Any) -> Tensor:
        """Read-only broadcast view (e.g. a (1, F) weight row to (P, F))."""
        data, valid = self.read()
        shape = tuple(int(s) for s in shape)
        if self._st.borrowed:  # the view must not outlive a borrowed tile's source
            self._st.own()
            data, valid = self.read()
        vals = np.broadcast_to(data, shape)
        ok = None if valid is None else np.broadcast_to(valid, shape)
        view = Tensor(Storage(vals, self.buffer, valid=ok, account=False))
        view._st.uid = self._st.uid
        return view

    def ap(
        self,
        pattern: Any,
        offset: int | None = None,
        scalar_offset: Any = None,
        vector_offset: Any = None,
        indirect_dim: int = 0,
        dtype: Any = None,
    ) -> Tensor:
        """New-dialect hardware access pattern over this tensor's storage (see views.py)."""
        from .views import access_pattern

        return access_pattern(
            self, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype
        )

    def expand_dims(self, axis: int) -> Tensor:
        """View with a new size-1 axis."""
        shape = list(self.shape)
        shape.insert(axis, 1)
        return self.reshape(tuple(shape))

    # -- assignment and operators ---------------------------------------------------------
    def __setitem__(self, index: Any, value: Any) -> None:
        view = self[index]
        if isinstance(value, Tensor) and value.storage is view.storage and _same_key(value, view):
            return  # `t[i] += x` re-assigns the already-updated view to itself
        from . import language

        run = maybe_current_run()
        pending = LOOP_REDUCE.pop(value, None) if isinstance(value, Tensor) else None
        if pending is not None:  # `t[...] = nl.loop_reduce(x, op, ...)`: t = op(t, x)
            opname, site = pending
            site["assigned"] = True
            from .ops import BINARY

            old, old_ok = view.read()
            new, new_ok = language._operand_values(value, view.shape)
            with np.errstate(all="ignore"):
                combined = BINARY[opname][0](dtypes.to_f32(old), new)
            ok = old_ok if new_ok is None else (new_ok if old_ok is None else old_ok & new_ok)
            with run.to_last_instruction() if run is not None else contextlib.nullcontext():  # type: ignore[union-attr]
                # an associative reduction, allowed across affine iterations (as `+=`)
                view.write(np.asarray(combined, np.float32), ok, accumulate=True)
            return
        moved = run is not None and isinstance(value, Tensor) and run.wrote_last(value.storage.uid)
        # `t[...] = op(...)`: on hardware the instruction writes t directly.
        with run.to_last_instruction() if moved else contextlib.nullcontext():  # type: ignore[union-attr]
            values, valid = language._operand_values(value, view.shape)
            produced = value.produced if isinstance(value, Tensor) else None
            if produced is not None and produced.shape == view.shape:
                view.write(values, valid, produced)
            else:
                view.write(values, valid)

    def _inplace(self, op: str, other: Any) -> Tensor:
        run = maybe_current_run()
        if run is not None and self.buffer is Buffer.PSUM:
            # PSUM `+=` is the producing instruction's near-memory accumulation, not a new
            # instruction: its accesses belong to that instruction (e.g. the matmul).
            with run.to_last_instruction():
                return self._apply_inplace(op, other)
        return self._apply_inplace(op, other)

    def _apply_inplace(self, op: str, other: Any) -> Tensor:
        if self._accumulate_fast(op, other):
            return self  # PSUM accumulation: no instruction of its own (_record_inplace)
        from . import language

        if op == "add" and self._starts_accumulation(other):
            # TensorE opens an accumulation group with an overwrite: `psum += nc_matmul(...)`
            # into a never-written PSUM tile is the first write (nki-facts §4 nc_matmul), and
            # published legacy kernels rely on it (attention_fwd v8a/v11).
            idx = self._index()
            ok = self._st.valid[idx]
            seed = np.where(ok, dtypes.to_f32(self._st.data[idx]), np.float32(0.0))
            self.write(seed, None, accumulate=True)
        result = language._binary_op(op, self, other, dtype=self.dtype, record=False)
        values, valid = result.read()
        self.write(values, valid, accumulate=True)
        language._record_inplace(self, op, other)
        return self

    def _accumulate_fast(self, op: str, other: Any) -> bool:
        """`psum_tile += matmul(...)` with both fully valid fp32 tiles of one shape: the sum is
        written straight back (the general path's promotion and broadcasting would be no-ops)."""
        if (
            op != "add"
            or self.buffer is not Buffer.PSUM
            or not isinstance(other, Tensor)
            or self.advanced
            or other.advanced
            or self.dtype != dtypes.float32
            or other.dtype != dtypes.float32
            or other.shape != self.shape
            or self._starts_accumulation(other)
        ):
            return False
        mine, theirs = self._st, other._st
        if not (mine.boxes is None is mine._valid and theirs.boxes is None is theirs._valid):
            return False  # some element may be uninitialised: the general path tracks it
        if not self.shape:
            return False  # a single element (integer key): numpy gives a scalar, not a view
        queued = theirs.pending
        # A queued product (isa.nc_matmul) joins this tile's queue instead of being computed:
        # only into a tile no other storage views (``borrowers`` is set once a tile is lent
        # or aliased), whose own memory the queue may then update in place.
        defer = (
            queued is not None
            and len(queued) == 1
            and not queued[0].accumulate
            and queued[0].key == other.key
            and not mine.borrowed
            and mine.borrowers is None
        )
        # What read() + write() would do for fully valid fp32 tiles, without the temporaries:
        # the same affine checks and dependency notes, then one in-place add.
        addend = None if defer else theirs.data[other.key]
        check_affine_read(other, other.key, None)
        check_affine_read(self, self.key, None)
        run = maybe_current_run()
        if run is not None:
            run.note_read(theirs.uid)
            run.note_read(mine.uid)
        if addend is None:
            work = queued[0]
            blocks = (work.blocks[0][0], work.blocks[1][0])
            mine.defer(
                Deferred(self.key, True, work.stationary[0], work.moving[0], blocks, work.product)
            )
        else:
            if mine.borrowed or mine.borrowers:
                mine.before_write()  # copy on write, before the target view is taken
            target = mine.data[self.key]
            with np.errstate(all="ignore"):
                np.add(target, addend, out=target)
        mine.dirty = True
        if run is not None:
            run.note_write(mine.uid)
        return True

    def _starts_accumulation(self, other: Any) -> bool:
        """PSUM += PSUM (a matmul result) onto elements that were never written."""
        if self.buffer is not Buffer.PSUM or not isinstance(other, Tensor):
            return False
        if other.buffer is not Buffer.PSUM or self._st.valid is None:
            return False
        return not self._st.valid[self._index()].all()

    def __iadd__(self, other: Any) -> Tensor:
        return self._inplace("add", other)

    def __isub__(self, other: Any) -> Tensor:
        return self._inplace("subtract", other)

    def __imul__(self, other: Any) -> Tensor:
        return self._inplace("multiply", other)

    def __itruediv__(self, other: Any) -> Tensor:
        return self._inplace("divide", other)


def _same_key(a: Tensor, b: Tensor) -> bool:
    if a.advanced or b.advanced:
        return (
            a.advanced
            and b.advanced
            and all(np.array_equal(x, y) for x, y in zip(a.key, b.key, strict=True))
        )
    return a.key == b.key


_BITWISE_ON_INTS = {"logical_and": "bitwise_and", "logical_or": "bitwise_or"}


def _int_tile(x: Any) -> bool:
    """An integer (not bool, not float) tile or Python/numpy integer."""
    if isinstance(x, Tensor):
        return x.dtype in dtypes.INTS
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _binary(name: str, reflected: bool = False) -> Any:
    """Python operator hook that forwards to the nl function of the same name."""

    def method(self: Tensor, other: Any) -> Tensor:
        from . import language

        if name in ("add", "subtract", "multiply") and _index_expr(other):
            # `offsets[0, i] + iy`: a dynamic offset read from a one-element on-chip integer
            # tile (a register on hardware) plus an nl.arange/mgrid index expression.
            fn = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}[name]
            off = self.dynamic_offset()
            return fn(other, off) if reflected else fn(off, other)
        lhs, rhs = (other, self) if reflected else (self, other)
        op = name
        if name in _BITWISE_ON_INTS and _int_tile(lhs) and _int_tile(rhs):
            op = _BITWISE_ON_INTS[name]  # `&`/`|` on integer tiles are bitwise (C semantics)
        return language._binary_op(op, lhs, rhs)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    method.__doc__ = f"Tile operator for nl.{name} (computed in fp32, cast to the result type)."
    return method


for _dunder, _op in {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "divide",
    "pow": "power",
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
    "and": "logical_and",
    "or": "logical_or",
    "xor": "bitwise_xor",
    "lshift": "left_shift",
    "rshift": "right_shift",
    "mod": "mod",
}.items():
    setattr(Tensor, f"__{_dunder}__", _binary(_op))
    if _dunder not in ("lt", "le", "gt", "ge"):
        setattr(Tensor, f"__r{_dunder}__", _binary(_op, reflected=True))


def _neg(self: Tensor) -> Tensor:
    from . import language

    return language.negative(self)


Tensor.__neg__ = _neg  # type: ignore[method-assign]


def _invert(self: Tensor) -> Tensor:
    from . import language

    return language.invert(self)


Tensor.__invert__ = _invert  # type: ignore[method-assign]
