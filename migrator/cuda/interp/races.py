"""Shared-memory race detection between barriers (compute-sanitizer racecheck, vectorised).

Per shared buffer and per barrier interval we keep, for every address, the smallest and largest
linear thread id that wrote it and that read it. An access by thread t conflicts when another
thread (min != t or max != t) wrote the address, or, for a write, read it. Two lanes of one
statement writing the same address show up as min != max after the update. `__syncthreads()`
starts a new interval (reset). Thread ids are per block and addresses include the block row, so
different blocks never conflict (they have different shared memory).

Reads are recorded lazily: the reader table only matters to a later write in the same
interval, so reads are queued and folded in (two `ufunc.at` scatters) when a write comes or
the queue grows large; a barrier drops the queue. In a tiled matmul the inner loop only reads
shared memory between barriers, so its reads cost one gather each and no scatter.
"""

from __future__ import annotations

import numpy as np

NONE = np.iinfo(np.int64).max
PENDING_LIMIT = 1 << 23  # queued read lanes before they are folded in


class RaceTracker:
    def __init__(self, n: int) -> None:
        self.w_min = np.full(n, NONE, dtype=np.int64)
        self.w_max = np.full(n, -1, dtype=np.int64)
        self.r_min = np.full(n, NONE, dtype=np.int64)
        self.r_max = np.full(n, -1, dtype=np.int64)
        self.dirty = False
        self.written = False  # any write in this interval (reads race only with writes)
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.pending_n = 0

    def reset(self) -> None:
        """A barrier: every earlier access happens-before every later one."""
        self.pending.clear()
        self.pending_n = 0
        self.written = False
        if self.dirty:
            for a, v in (
                (self.w_min, NONE),
                (self.w_max, -1),
                (self.r_min, NONE),
                (self.r_max, -1),
            ):
                a.fill(v)
            self.dirty = False

    @staticmethod
    def _other(lo: np.ndarray, hi: np.ndarray, tid: np.ndarray) -> np.ndarray:
        return (lo != NONE) & ((lo != tid) | (hi != tid))

    def read(self, flat: np.ndarray, tid: np.ndarray) -> np.ndarray | None:
        """Record reads of `flat` by `tid` (active lanes only); returns lanes that race
        (None: nothing was written in this interval, so no read can race)."""
        race = self._other(self.w_min[flat], self.w_max[flat], tid) if self.written else None
        self.pending.append((flat, np.broadcast_to(tid, flat.shape)))
        self.pending_n += flat.size
        if self.pending_n > PENDING_LIMIT:
            self._fold()
        return race

    def _fold(self) -> None:
        for flat, tid in self.pending:
            _scatter_min_max(self.r_min, self.r_max, flat, tid)
        self.pending.clear()
        self.pending_n = 0
        self.dirty = True

    def write(self, flat: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Record writes; returns lanes that race (other writer/reader, or a same-statement
        write of the same address by another lane)."""
        if self.pending:
            self._fold()
        race = self._other(self.w_min[flat], self.w_max[flat], tid)
        race |= self._other(self.r_min[flat], self.r_max[flat], tid)
        _scatter_min_max(self.w_min, self.w_max, flat, tid)
        race |= self.w_min[flat] != self.w_max[flat]
        self.dirty = True
        self.written = True
        return race


def _scatter_min_max(lo: np.ndarray, hi: np.ndarray, flat: np.ndarray, tid: np.ndarray) -> None:
    """lo[f] = min(lo[f], tid), hi[f] = max(hi[f], tid) for every access, duplicates included.

    Fast path: strictly increasing addresses (the usual `s[tid]`) have no duplicates, so a plain
    fancy assignment is exact; otherwise the unbuffered `ufunc.at` (the reference path).
    """
    if flat.size < 2 or bool(np.all(flat[1:] > flat[:-1])):
        lo[flat] = np.minimum(lo[flat], tid)
        hi[flat] = np.maximum(hi[flat], tid)
    else:
        np.minimum.at(lo, flat, tid)
        np.maximum.at(hi, flat, tid)
