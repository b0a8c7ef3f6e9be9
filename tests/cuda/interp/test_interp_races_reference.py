"""The vectorised race tracker (`races.py`) against a per-access reference with Python sets.

Random statements (reads or writes of random addresses by random thread ids, repeats included)
between random barriers; every statement's per-lane race flags must equal the reference's.
"""

from __future__ import annotations

import numpy as np
import pytest

from migrator.cuda.interp.races import TID, RaceTracker


class Reference:
    """Per address: the sets of threads that wrote / read it since the last barrier."""

    def __init__(self) -> None:
        self.writers: dict[int, set[int]] = {}
        self.readers: dict[int, set[int]] = {}

    def reset(self) -> None:
        self.writers.clear()
        self.readers.clear()

    def read(self, flat: list[int], tid: list[int]) -> list[bool]:
        race = [bool(self.writers.get(f, set()) - {t}) for f, t in zip(flat, tid, strict=True)]
        for f, t in zip(flat, tid, strict=True):
            self.readers.setdefault(f, set()).add(t)
        return race

    def write(self, flat: list[int], tid: list[int]) -> list[bool]:
        same: dict[int, set[int]] = {}
        for f, t in zip(flat, tid, strict=True):
            same.setdefault(f, set()).add(t)
        race = []
        for f, t in zip(flat, tid, strict=True):
            before = self.writers.get(f, set()) | self.readers.get(f, set())
            race.append(bool(before - {t}) or len(same[f]) > 1)
        for f, t in zip(flat, tid, strict=True):
            self.writers.setdefault(f, set()).add(t)
        return race


def _same_flags(
    fast: RaceTracker, ref: Reference, kind: str, flat: np.ndarray, tid: np.ndarray,
    within: tuple[int, int] | None = None,
) -> None:  # fmt: skip
    """One statement's access made on both trackers: the same race flags, lane by lane."""
    if kind == "read":
        got = fast.read(flat, tid, None, within)
        want = ref.read(flat.tolist(), tid.tolist())
        got_list = [False] * flat.size if got is None else got.tolist()
    else:
        got_list = fast.write(flat, tid, None, within).tolist()
        want = ref.write(flat.tolist(), tid.tolist())
    assert got_list == want, (kind, flat.tolist(), tid.tolist())


@pytest.mark.parametrize("seed", range(20))
def test_tracker_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(4, 40))
    fast, ref = RaceTracker(size), Reference()
    for _ in range(60):
        kind = rng.choice(["read", "write", "barrier"], p=[0.45, 0.45, 0.1])
        if kind == "barrier":
            fast.reset()
            ref.reset()
            continue
        k = int(rng.integers(1, 12))
        if rng.random() < 0.5:  # distinct increasing addresses: the fast path
            flat = np.sort(rng.choice(size, size=min(k, size), replace=False)).astype(np.int64)
        else:
            flat = rng.integers(0, size, size=k).astype(np.int64)
        tid = rng.integers(0, 6, size=flat.size).astype(TID)
        _same_flags(fast, ref, kind, flat, tid)


@pytest.mark.parametrize("seed", range(30))
def test_queued_reads_by_row_range_match_reference(seed: int) -> None:
    """Reads stay queued past writes to other offsets of a block's row, and a read repeated
    exactly is queued once (`_fold_overlapping`, `pending_by`): the flags still equal the
    reference's, over several blocks' rows, for accesses of one or several steps (a widened
    loop's), with the caller's `within` bounds or without."""
    rng = np.random.default_rng(1000 + seed)
    row, blocks = int(rng.integers(4, 24)), int(rng.integers(1, 4))
    fast, ref = RaceTracker(row * blocks, row), Reference()
    earlier: list[tuple[np.ndarray, np.ndarray]] = []
    for _ in range(80):
        kind = rng.choice(["read", "write", "barrier"], p=[0.5, 0.42, 0.08])
        if kind == "barrier":
            fast.reset()
            ref.reset()
            continue
        if kind == "read" and earlier and rng.random() < 0.3:  # the same read again
            flat, tid = (a.copy() for a in earlier[int(rng.integers(len(earlier)))])
            if rng.random() < 0.5:  # by other threads
                tid = rng.integers(0, 6, size=flat.size).astype(TID)
        else:
            lanes, steps = int(rng.integers(1, 8)), int(rng.integers(1, 4))
            lo = int(rng.integers(0, row))  # offsets in a narrow window: many disjoint ranges
            width = int(rng.integers(1, 4))
            off = rng.integers(lo, min(row, lo + width), size=(steps, lanes))
            block = rng.integers(0, blocks, size=lanes)
            # (a widened loop's access: its steps' lanes one after another)
            flat = (block * row + off).astype(np.int64).reshape(-1)
            tid = np.tile(rng.integers(0, 6, size=lanes).astype(TID), steps)
            earlier.append((flat, tid))
        within = None
        if rng.random() < 0.5:
            within = int((flat % row).min()), int((flat % row).max())
        _same_flags(fast, ref, kind, flat, tid, within)


def test_reads_queue_past_writes_elsewhere_in_the_row() -> None:
    """Two blocks' rows of 8: reads of offsets 0-1 stay queued while other offsets are
    written (in either block), a repeat by the same threads is queued once, one by other
    threads is kept, and a write to an offset read then races with the readers."""
    t = RaceTracker(16, 8)
    lanes = np.array([0, 1, 8, 9], dtype=np.int64)  # offsets 0 and 1 of both rows
    tid = np.array([0, 1, 0, 1], dtype=TID)
    assert t.read(lanes, tid) is None
    assert t.read(lanes.copy(), tid.copy()) is None
    assert len(t.pending) == 1  # the same read again: nothing new
    assert not t.write(np.array([4, 13], dtype=np.int64), np.array([2, 3], dtype=TID)).any()
    assert len(t.pending) == 1  # offsets 4 and 5: the queued read cannot race with it
    t.read(lanes.copy(), np.array([2, 2, 2, 2], dtype=TID))
    assert len(t.pending) == 2  # other threads: kept
    got = t.write(np.array([1, 8], dtype=np.int64), np.array([1, 0], dtype=TID))
    assert got.tolist() == [True, True]  # thread 2 read both, in both rows
    assert not t.pending
    t.reset()
    assert not t.write(np.array([1, 8], dtype=np.int64), np.array([3, 3], dtype=TID)).any()


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("empty", [True, False])
def test_repeated_addresses_group_the_same_without_sorting(seed: int, empty: bool) -> None:
    """`_record`'s linear grouping of repeated addresses (a table-sized scratch) leaves the
    table exactly as the sorting one does: one thread's accesses keep its id, several threads'
    make the address MANY, merged with what the table held; the scratch is all NONE after."""
    from migrator.cuda.interp.races import MANY, NONE, _record

    rng = np.random.default_rng(seed)
    n = 64
    flat = rng.integers(0, n, size=int(rng.integers(2, 300)))
    tid = rng.integers(0, 8, size=flat.size).astype(TID)
    start = (np.full(n, NONE, dtype=TID) if empty
             else rng.choice([NONE, MANY, 0, 3, 5], size=n).astype(TID))  # fmt: skip
    sorted_t, linear_t = start.copy(), start.copy()
    scratch = np.full(n, NONE, dtype=TID)
    assert _record(sorted_t, flat, tid, empty) == _record(linear_t, flat, tid, empty,
                                                          scratch=scratch)  # fmt: skip
    np.testing.assert_array_equal(linear_t, sorted_t)
    assert (scratch == NONE).all()
