"""Shared-memory race detection between barriers (compute-sanitizer racecheck, vectorised).

Per shared buffer and per barrier interval we keep, for every address, who wrote it and who
read it, each as one int16: `NONE` (-1, nobody), a thread id (exactly that thread), or `MANY`
(-2, two or more threads). An access by thread t conflicts when an address was written by
someone other than t, or, for a write, read by someone other than t: `v not in (NONE, t)`.
Two lanes of one statement writing one address make it `MANY`. `__syncthreads()` starts a new
interval (reset). Thread ids are per block and addresses include the block row, so different
blocks never conflict (they have different shared memory).

An update is one gather, one `np.where` and one scatter per table when the addresses of a
statement are distinct (the usual `s[tid]`); repeated addresses are first grouped (sort and
`reduceat`), the slow path. Reads are recorded lazily: the reader table only matters to a later
write in the same interval, so reads are queued and folded in when a write comes or the queue
grows large; a barrier drops the queue. In a tiled matmul the inner loop only reads shared
memory between barriers, so its reads cost one gather each and no scatter.
"""

from __future__ import annotations

import numpy as np

from migrator.cuda.interp.span import Span, take

TID = np.int16  # thread ids inside a block are < 1024: narrow tables move less memory
NONE = -1
MANY = -2
PENDING_LIMIT = 1 << 23  # queued read lanes before they are folded in
# a queued read: addresses, thread ids, their run structure, lowest and highest address in a row
_Read = tuple[np.ndarray, np.ndarray, Span | None, int, int]
_EMPTY = (1 << 62, -1)  # an empty queue's address range: any min and max of addresses replace it


class RaceTracker:
    def __init__(self, n: int, row: int | None = None) -> None:
        self.row = row or n  # elements per block: the queued reads' ranges are within a block
        self.writer = np.full(n, NONE, dtype=TID)
        self.reader = np.full(n, NONE, dtype=TID)
        self.dirty = False
        self.written = False  # any write in this interval (reads race only with writes)
        self.read_any = False  # any read folded into `reader` in this interval
        # queued reads, each with the lowest and highest address it reads; their number of
        # lanes, their address range (empty: lo > hi), and by (lo, hi, shape), where a read's
        # repeat is looked for (`_queue`)
        self.pending: list[_Read] = []
        self.pending_n = 0
        self.pending_lo, self.pending_hi = _EMPTY
        self.pending_by: dict[tuple[int, int, tuple[int, ...]], list[_Read]] = {}
        self._scratch: np.ndarray | None = None  # (`_record`'s, made on first use)

    def scratch(self) -> np.ndarray:
        if self._scratch is None:
            self._scratch = np.full(self.writer.shape, NONE, dtype=TID)
        return self._scratch

    def reset(self) -> None:
        """A barrier: every earlier access happens-before every later one."""
        self._queue([])
        self.written = False
        self.read_any = False
        if self.dirty:
            self.writer.fill(NONE)
            self.reader.fill(NONE)
            self.dirty = False

    def read(
        self,
        flat: np.ndarray,
        tid: np.ndarray,
        span: Span | None = None,
        within: tuple[int, int] | None = None,
    ) -> np.ndarray | None:
        """Record reads of `flat` by `tid` (active lanes only); returns lanes that race
        (None: nothing was written in this interval, so no read can race). `span`: the run
        structure of `flat` (span.py), whose tables are then read and written as views;
        `within`: the lowest and highest offset in a block's row, where the caller knows them."""
        race = _other(take(self.writer, flat, span), tid) if self.written else None
        if flat.size == 0:
            return race
        lo, hi = within if within is not None else _bounds(flat, span, self.row)
        tid = tid if tid.shape == flat.shape else np.broadcast_to(tid, flat.shape)
        # the same lanes reading the same addresses again (a loop reading a thread's own row at
        # every step of an outer loop) change no owner: queued once
        same = self.pending_by.setdefault((lo, hi, flat.shape), [])
        for old in same:
            if np.array_equal(old[0], flat) and np.array_equal(old[1], tid):
                return race
        entry = (flat, tid, span, lo, hi)
        same.append(entry)
        self.pending.append(entry)
        self.pending_n += flat.size
        self.pending_lo, self.pending_hi = min(self.pending_lo, lo), max(self.pending_hi, hi)
        if self.pending_n > PENDING_LIMIT:
            self._fold(self.pending)
            self._queue([])
        return race

    def _queue(self, entries: list[_Read]) -> None:
        """The queue of reads set to `entries` (none: emptied), its tallies made anew."""
        self.pending = entries
        self.pending_by = {}
        for p in entries:
            self.pending_by.setdefault((p[3], p[4], p[0].shape), []).append(p)
        self.pending_n = sum(p[0].size for p in entries)
        self.pending_lo = min((p[3] for p in entries), default=_EMPTY[0])
        self.pending_hi = max((p[4] for p in entries), default=_EMPTY[1])

    def _fold_overlapping(self, lo: int, hi: int) -> None:
        """Fold in the queued reads of addresses within [lo, hi], the range a write
        touches; the others stay queued: they cannot race with it, only with a later write
        (a tile loop reads its operands' buffers and writes another, as often as it steps)."""
        if hi < self.pending_lo or lo > self.pending_hi:
            return
        self._fold([p for p in self.pending if p[3] <= hi and p[4] >= lo])
        self._queue([p for p in self.pending if p[3] > hi or p[4] < lo])

    def _fold(self, entries: list[_Read]) -> None:
        # reads whose addresses repeat (a loop's broadcast `k[y * d + x]`, one address per
        # block) are recorded together, one sort for all: an address's owner after several
        # accesses does not depend on their order
        repeats: list[tuple[np.ndarray, np.ndarray]] = []
        for flat, tid, span, _, _ in entries:
            if span is None and flat.size > 1 and not bool(_ALL(flat[1:] > flat[:-1])):
                repeats.append((flat.reshape(-1), tid.reshape(-1)))
                continue
            _record(self.reader, flat, tid, not self.read_any, span)
            self.read_any = True
        if repeats:
            flat = np.concatenate([f for f, _ in repeats])
            tid = np.concatenate([t for _, t in repeats])
            _record(self.reader, flat, tid, not self.read_any, scratch=self.scratch())
            self.read_any = True
        self.dirty = True

    def write(
        self,
        flat: np.ndarray,
        tid: np.ndarray,
        span: Span | None = None,
        within: tuple[int, int] | None = None,
    ) -> np.ndarray:
        """Record writes; returns lanes that race (another writer or reader in this interval,
        or another lane of this statement writing the same address)."""
        if flat.size == 0:
            return np.zeros(flat.shape, dtype=bool)
        if self.pending:
            self._fold_overlapping(*(within or _bounds(flat, span, self.row)))
        # a table with nothing recorded since the barrier needs no gather
        if self.written:
            race = _other(take(self.writer, flat, span), tid)
            if self.read_any:
                race |= _other(take(self.reader, flat, span), tid)
        elif self.read_any:
            race = _other(take(self.reader, flat, span), tid)
        else:
            race = np.zeros(flat.shape, dtype=bool)
        if _record(self.writer, flat, tid, not self.written, span, self.scratch()):
            race |= self.writer[flat] == MANY  # same-statement writers of one address
        self.dirty = True
        self.written = True
        return race


# (the ufuncs' own reductions: `np.all` and `np.argsort` go through wrappers, and a loop's
# shared reads ask at every step)
_ALL = np.logical_and.reduce


def _bounds(flat: np.ndarray, span: Span | None, row: int) -> tuple[int, int]:
    """The lowest and highest address of an access within its block's row of the table
    (blocks never race with each other, and a launch's lanes reach every block's row)."""
    if span is not None:
        lo, hi = span.start, span.start + (span.rows - 1) * span.step + span.cols - 1
    else:
        lo, hi = int(flat.min()), int(flat.max())
    if lo // row == hi // row:
        return lo % row, hi % row
    within = np.remainder(flat, row)
    return int(within.min()), int(within.max())


def _other(owner: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Accesses by someone other than `tid` (owner is neither nobody nor tid itself)."""
    return (owner != NONE) & (owner != tid)


def _merge(old: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Owner after `tid` (a thread id or MANY) accesses an address owned by `old`."""
    return np.where((old == NONE) | (old == tid), tid, np.asarray(MANY, dtype=TID)).astype(
        TID, copy=False
    )


def _record(
    table: np.ndarray, flat: np.ndarray, tid: np.ndarray, empty: bool, span: Span | None = None,
    scratch: np.ndarray | None = None,
) -> bool:  # fmt: skip
    """table[f] = merge(table[f], tid) for every access, repeated addresses included.

    Fast path: strictly increasing addresses have no repeats, so one fancy assignment is exact
    (a plain store of `tid` when the table is `empty`, all NONE). Otherwise accesses are grouped
    by address first: a group of one thread id keeps it, a group of several becomes MANY (with
    `scratch`, a table-sized array of NONE, in linear time; else by sorting). Returns whether
    addresses repeated.
    """
    if span is not None:  # strictly increasing by construction: the fast path, as a view
        view = span.view(table)
        view[...] = span.grid(tid) if empty else _merge(view, span.grid(tid))
        return False
    if flat.size < 2 or bool(_ALL(flat[1:] > flat[:-1])):
        table[flat] = tid if empty else _merge(table[flat], tid)
        return False
    if scratch is not None:
        # no sort: one thread id per address is kept in `scratch` (all NONE between calls),
        # any access by another thread makes it MANY, and every access then merges that
        # (repeats of an address merge the same value)
        t = np.broadcast_to(tid, flat.shape)
        scratch[flat] = t
        scratch[flat[scratch[flat] != t]] = MANY
        group = scratch[flat]
        table[flat] = group if empty else _merge(table[flat], group)
        scratch[flat] = NONE
        return True
    order = flat.argsort(kind="stable")
    f, t = flat[order], np.broadcast_to(tid, flat.shape)[order]
    starts = np.flatnonzero(np.concatenate(([True], f[1:] != f[:-1])))
    lo, hi = np.minimum.reduceat(t, starts), np.maximum.reduceat(t, starts)
    group = np.where(lo == hi, lo, np.asarray(MANY, dtype=TID)).astype(TID, copy=False)
    addr = f[starts]
    table[addr] = _merge(table[addr], group)
    return True
