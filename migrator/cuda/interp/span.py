"""Regular access patterns: element indices that are runs of consecutive elements.

Most accesses of a launch are `a[i]` with `i` consecutive over the lanes, or `s[tid]` over the
active threads of every block: equal-length runs of consecutive elements at a constant distance.
Such an index array is a strided view of the buffer, and a view is read and written at memory
speed, where numpy's gathers and scatters by index cost several times more. `span_of` finds the
pattern with O(1) tests first, so irregular indices pay almost nothing; everything that uses a
`Span` must give exactly what indexing with the array gives (a span is strictly increasing,
so no element repeats).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_LANES = 256  # below this, fancy indexing is as fast as the test
PROBE = 2048  # the first run must end within this many lanes to be found
MIN_COLS = 64  # shorter runs: numpy's gathers and scatters are as fast as strided copies


@dataclass(frozen=True, slots=True)
class Span:
    """`flat[i * cols + j] == start + i * step + j` for `i < rows`, `j < cols`."""

    start: int
    rows: int
    cols: int
    step: int

    def view(self, arr: np.ndarray) -> np.ndarray:
        """The selected elements of a flat array as a (rows, cols) view (writes go through)."""
        if self.rows == 1:
            return arr[self.start : self.start + self.cols].reshape(1, self.cols)
        item = arr.itemsize
        return np.lib.stride_tricks.as_strided(
            arr[self.start :], (self.rows, self.cols), (self.step * item, item)
        )

    def take(self, arr: np.ndarray) -> np.ndarray:
        """A contiguous copy of the selected elements, in index order (like `np.take`)."""
        return np.array(self.view(arr)).reshape(-1)

    def put(self, arr: np.ndarray, values: np.ndarray | object) -> None:
        """`arr[flat] = values` (values: one per element, or a scalar)."""
        self.view(arr)[...] = self.grid(np.asarray(values))

    def grid(self, values: np.ndarray) -> np.ndarray:
        """Per-element values (or a broadcast scalar) shaped like `view`."""
        return np.broadcast_to(values, (self.rows * self.cols,)).reshape(self.shape)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)


def span_of(flat: np.ndarray) -> Span | None:
    """The run structure of an int index array, or None when it has none (or runs too short to
    be worth it: below MIN_COLS elements a gather is as fast as a strided copy)."""
    n = flat.size
    if n < MIN_LANES or flat.ndim != 1:
        return None
    first, last = int(flat[0]), int(flat[-1])
    if last - first < n - 1 or int(flat[MIN_COLS - 1]) - first != MIN_COLS - 1:
        # repeats or decreases somewhere, or the first run is shorter than MIN_COLS (its
        # first MIN_COLS elements are not consecutive: lanes sharing a row, `s[ty][k]`)
        return None
    if last - first == n - 1:
        cols = n  # n distinct values in a range of n only if strictly increasing: consecutive
    else:
        probe = flat[: min(n, PROBE) + 1]
        breaks = np.flatnonzero(probe[1:] - probe[:-1] != 1)
        if breaks.size == 0:
            return None
        cols = int(breaks[0]) + 1
        if cols < MIN_COLS or n % cols:
            return None
    rows = n // cols
    step = int(flat[cols]) - first if rows > 1 else n
    if rows > 1 and (step <= cols or first + (rows - 1) * step + cols - 1 != last):
        return None
    # One full pass: strictly increasing. Then per row (O(rows)): a row of `cols` increasing
    # values spanning exactly cols - 1 is consecutive, and the row starts are `step` apart.
    if not bool(np.all(flat[1:] > flat[:-1])):
        return None
    if rows > 1:
        grid = flat.reshape(rows, cols)
        starts = grid[:, 0]
        if not (
            np.array_equal(grid[:, -1] - starts, np.full(rows, cols - 1))
            and np.array_equal(starts, np.arange(first, first + rows * step, step))
        ):
            return None
    return Span(first, rows, cols, step)


def take(arr: np.ndarray, index: np.ndarray, span: Span | None) -> np.ndarray:
    """`arr[index]`; for a flat (1-D) array a strided copy when `span` describes the index."""
    if arr.ndim != 1:
        return arr[index]
    return span.take(arr) if span is not None else arr.take(index)  # (faster than indexing)


def put(arr: np.ndarray, index: np.ndarray, span: Span | None, values: object) -> None:
    """`arr[index] = values` for a flat array, through the strided view when there is one."""
    if span is not None and arr.ndim == 1:
        span.put(arr, values)
    else:
        arr[index] = values


__all__ = ["Span", "put", "span_of", "take"]
