"""Lane geometry of one batch of blocks: which (block, thread) each lane is.

Lanes are ordered block-major (blocks in linear grid order, x fastest), then by linear thread
id inside the block (x fastest). That is also the order in which warps are formed (32
consecutive linear thread ids) and the serialisation order of atomics (ascending global linear
thread id), so one ordering serves all three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from migrator.cuda.interp.findings import Coord

Dim3 = tuple[int, int, int]


@dataclass
class Geometry:
    grid: Dim3
    block: Dim3
    first_block: int  # linear id of the batch's first block
    n_blocks: int  # blocks in this batch
    # the batch's linear block ids where they are not first_block, first_block + 1, ...
    # (InterpOptions.blocks: a chosen subset of the grid runs as one batch)
    ids: np.ndarray | None = None

    def __post_init__(self) -> None:
        bx, by, bz = self.block
        self.threads = bx * by * bz
        self.n = self.n_blocks * self.threads
        self.lane_rows = self.n  # rows of per-lane (local) memory; a LaneView keeps its parent's
        self.full = np.ones(self.n, dtype=bool)
        self._cache: dict[str, Any] = {}

    # Lane index arrays are built on first use: a 1-D kernel never pays for blockIdx.y, and
    # a dimension of extent 1 (or a batch of one block) gives a uniform scalar, not an array.
    def _memo(self, key: str, make: Any) -> Any:
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = make()
        return v

    @property
    def lane(self) -> np.ndarray:
        return self._memo("lane", lambda: np.arange(self.n, dtype=np.int64))

    @property
    def blk(self) -> np.ndarray:
        """Block index inside the batch, per lane."""
        return self._memo(
            "blk", lambda: np.repeat(np.arange(self.n_blocks, dtype=np.int64), self.threads)
        )

    @property
    def tid(self) -> np.ndarray:
        """Linear thread id inside the block (x fastest), per lane."""
        return self._memo(
            "tid", lambda: np.tile(np.arange(self.threads, dtype=np.int64), self.n_blocks)
        )

    @property
    def tid16(self) -> np.ndarray:
        """`tid` as int16 (< 1024 threads per block), the race tables' dtype."""
        return self._memo("tid16", lambda: self.tid.astype(np.int16))

    def row_base(self, per: str, size: int) -> np.ndarray:
        """First flat element of each lane's row in a per-block or per-lane buffer of `size`
        elements per row (`blk * size` / `lane * size`), built once per batch."""
        rows = self.blk if per == "block" else self.lane
        return self._memo(f"{per}*{size}", lambda: rows * size)

    def thread_index(self, k: int) -> Any:
        """threadIdx.x/y/z (k = 0/1/2) as uint32 over lanes (a scalar if uniform)."""
        bx, by, bz = self.block
        if self.block[k] == 1:
            return np.uint32(0)
        t = np.arange(self.threads, dtype=np.int64)
        pattern = (t % bx, (t // bx) % by, t // (bx * by))[k].astype(np.uint32)
        return self._memo(f"t{k}", lambda: np.tile(pattern, self.n_blocks))

    @property
    def block_ids(self) -> np.ndarray:
        """The linear grid id of each block of the batch."""
        if self.ids is not None:
            return self.ids
        return self._memo("ids", lambda: np.arange(
            self.first_block, self.first_block + self.n_blocks, dtype=np.int64))  # fmt: skip

    def block_index(self, k: int) -> Any:
        """blockIdx.x/y/z as uint32 over lanes (a scalar if uniform)."""
        gx, gy, _ = self.grid
        lin = self.block_ids
        per_block = (lin % gx, (lin // gx) % gy, lin // (gx * gy))[k].astype(np.uint32)
        if self.grid[k] == 1 or self.n_blocks == 1:
            return per_block[0]
        # lanes are block-major: each block's value repeated over its threads (np.repeat is a
        # run copy, several times faster than gathering through the per-lane block index)
        return self._memo(f"b{k}", lambda: np.repeat(per_block, self.threads))

    def coord(self, lane: int) -> Coord:
        bx, by, _ = self.block
        gx, gy, _ = self.grid
        t = lane % self.threads
        b = int(self.block_ids[lane // self.threads])
        return Coord(
            block=(b % gx, (b // gx) % gy, b // (gx * gy)),
            thread=(t % bx, (t // bx) % by, t // (bx * by)),
        )

    def coords(self, mask: np.ndarray, limit: int = 4) -> list[Coord]:
        return [self.coord(int(i)) for i in np.flatnonzero(mask)[:limit]]
