"""Memory spaces and allocations: ``Buffer`` kinds and the ``Storage`` behind every tensor.

Storage carries the shadows the checks use: ``valid`` (initialised elements), ``stamps``
(affine-loop writer per element) and capacity accounting released by a finalizer when the
allocation dies.
"""

from __future__ import annotations

import itertools
import weakref
from enum import StrEnum

import numpy as np

from .checks import check_partitions
from .errors import NkiConstraintError, SourceLocation
from .run import Run

_UIDS = itertools.count(1)  # unique allocation ids; not run state


class Buffer(StrEnum):
    """Memory spaces (nki-facts §3.1); ``hbm`` is legacy private HBM."""

    SBUF = "sbuf"
    PSUM = "psum"
    HBM = "hbm"
    SHARED_HBM = "shared_hbm"
    PRIVATE_HBM = "private_hbm"

    @property
    def is_hbm(self) -> bool:
        """True for the three HBM flavours."""
        return self in (Buffer.HBM, Buffer.SHARED_HBM, Buffer.PRIVATE_HBM)

    @property
    def on_chip(self) -> bool:
        """True for SBUF and PSUM, whose first (partition) axis is limited to 128."""
        return not self.is_hbm


class Storage:
    """One allocation (or an alias of one after ``reshape``)."""

    __slots__ = (
        "data",
        "valid",
        "stamps",
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
        self.data = data
        self.valid = valid  # None means "every element is initialised"
        # Identity for the cost model's dependency schedule (ids of dead objects are reused).
        self.uid = next(_UIDS)
        # Copy on write. A borrowed storage holds a read-only view of memory it does not own
        # (a caller's array for kernel arguments, an HBM region for a loaded tile) and copies
        # it before its first write (``own``). A storage whose memory is lent out makes its
        # borrowers copy before it is written (``before_write``). Aliases share the list.
        self.borrowed = False
        self.borrowers: list[weakref.ref[Storage]] | None = None
        self.stamps: np.ndarray | None = None
        self.buffer = buffer
        self.pdim = pdim
        self.name = name
        self.alloc_depth = len(run.affine_stack) if run is not None else 0
        self.dirty = False
        self.mm_open = False  # an accumulation group is open (see isa nc_matmul accumulate)
        self.origin: SourceLocation | None = None  # kernel line that allocated it (HBM outputs)
        if buffer.on_chip:
            check_partitions(data.shape, pdim, f"{buffer.value} tile")
        if run is not None and account and buffer.on_chip:
            self._account(run)

    def own(self) -> None:
        """Replace a borrowed (read-only) view by a private contiguous copy."""
        if self.borrowed:
            self.data = np.array(self.data, copy=True, order="C")
            self.borrowed = False

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
        self.own()
        if self.borrowers:
            for ref in self.borrowers:
                borrower = ref()
                if borrower is not None:
                    borrower.own()
            self.borrowers.clear()

    def _account(self, run: Run) -> None:
        """Charge live SBUF bytes / PSUM banks to the run until this storage dies."""
        shape = self.data.shape
        blocks = int(np.prod(shape[: self.pdim], dtype=np.int64))
        free_bytes = int(np.prod(shape[self.pdim + 1 :], dtype=np.int64)) * self.data.itemsize
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
            weakref.finalize(self, run.release_psum, blocks)
        else:
            run.allocate_sbuf(blocks * free_bytes)
            weakref.finalize(self, run.release_sbuf, blocks * free_bytes)
