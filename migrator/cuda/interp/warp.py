"""Warp intrinsics: shuffles and votes, vectorised over all warps of the batch at once.

A warp is 32 consecutive linear thread ids of a block (x fastest); a block whose size is not a
multiple of 32 has a partial last warp. Source-lane rules follow PTX `shfl.sync` with the
`width` segment: up/down keep the lane's own value when the source falls outside its segment,
`xor` when the source is above the segment's last lane, `idx` wraps within the segment.

Checks (reported as `warp_mask` findings): the mask names a lane of the warp that is not
executing the call (exited or diverged), or a lane reads from a source lane that is inactive
(CUDA leaves that value undefined).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.values import Val, convert, lanes

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine

WARP_SIZE = 32


def _lane_id(m: Machine) -> np.ndarray:
    return m.geo._memo("warp_lane", lambda: m.geo.tid % WARP_SIZE)


def _warp_id(m: Machine) -> np.ndarray:
    """Global warp number of each lane within the batch."""
    per_block = -(-m.geo.threads // WARP_SIZE)
    return m.geo._memo("warp_id", lambda: m.geo.blk * per_block + m.geo.tid // WARP_SIZE)


def _check_mask(m: Machine, mask_val: Val, mask: np.ndarray, node: Node) -> None:
    """Every lane named in the member mask must be executing this call."""
    if m.geo.n == 0 or mask.all():  # every lane executes it: no named lane can be missing
        return
    wid = _warp_id(m)
    n_warps = int(wid[-1]) + 1
    mv_all = convert(mask_val, ct.UINT).data
    if np.ndim(mv_all) == 0:  # one mask for every lane (the usual 0xffffffff)
        named = ((np.uint64(mv_all) >> _lane_id(m).astype(np.uint64)) & np.uint64(1)).astype(bool)
    else:
        member = np.zeros(n_warps, dtype=np.uint64)
        mv = lanes(convert(mask_val, ct.UINT), m.geo.n).astype(np.uint64)
        np.bitwise_or.at(member, wid[mask], mv[mask])
        named = ((member[wid] >> _lane_id(m).astype(np.uint64)) & np.uint64(1)).astype(bool)
    warp_active = np.zeros(n_warps, dtype=bool)
    warp_active[wid[mask]] = True
    bad = named & ~mask & warp_active[wid]
    if bad.any():
        m.finding(
            node,
            "warp_mask",
            "warp intrinsic mask names lanes that are not executing it (exited or diverged)",
            bad,
        )


def _sources(
    m: Machine,
    b: np.ndarray,
    width: int,
    src_of: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Per lane: the batch lane it reads from, and whether that source thread exists."""
    lane = _lane_id(m)
    src_lane = src_of(lane, b, width)
    src_tid = m.geo.tid - lane + src_lane
    exists = src_tid < m.geo.threads  # partial last warp: no such thread
    src_tid = np.where(exists, src_tid, m.geo.tid)
    return m.geo.lane - m.geo.tid + src_tid, exists


def _shuffle(
    m: Machine,
    args: list[Val],
    mask: np.ndarray,
    node: Node,
    src_of: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
) -> Val:
    if len(args) not in (3, 4):
        raise m.error(node, "shuffle takes (mask, value, lane/delta[, width])")
    mask_val, value, arg = args[0], args[1], args[2]
    width = int(args[3].data) if len(args) == 4 else WARP_SIZE
    if width not in (1, 2, 4, 8, 16, 32):
        raise m.error(node, f"shuffle width {width} is not a power of two <= 32")
    _check_mask(m, mask_val, mask, node)
    delta = convert(arg, ct.INT).data
    if np.ndim(delta) == 0:
        # one lane/delta for the whole batch (a shuffle tree's offsets): the source table
        # depends only on the geometry, so each tree level builds it once per batch
        key = f"shfl:{src_of.__name__}:{int(delta)}:{width}"
        src, exists = m.geo._memo(key, lambda: _sources(m, np.int64(delta), width, src_of))
    else:
        src, exists = _sources(m, np.asarray(delta, dtype=np.int64), width, src_of)
    inactive_src = mask & (~exists | ~mask[src])  # a missing lane of a partial warp too
    if inactive_src.any():
        m.finding(
            node,
            "warp_mask",
            "shuffle reads a value from a lane that is not active (undefined in CUDA)",
            inactive_src,
        )

    return _picked(value, src, m.geo.n)


def _picked(v: Val, src: np.ndarray, n: int) -> Val:
    """Each lane's value from lane `src` (component by component). A function of its own,
    not a closure that calls itself: that would be a reference cycle holding the machine."""
    if v.comps is not None:
        return Val(v.ctype, comps=tuple(_picked(c, src, n) for c in v.comps))
    return Val(v.ctype, lanes(v, n)[src])


def _src_idx(lane: np.ndarray, b: np.ndarray, w: int) -> np.ndarray:
    return (lane // w) * w + (b % w)


def _src_up(lane: np.ndarray, b: np.ndarray, w: int) -> np.ndarray:
    return np.where((lane % w) - b >= 0, lane - b, lane)


def _src_down(lane: np.ndarray, b: np.ndarray, w: int) -> np.ndarray:
    return np.where((lane % w) + b < w, lane + b, lane)


def _src_xor(lane: np.ndarray, b: np.ndarray, w: int) -> np.ndarray:
    j = lane ^ b
    last = (lane // w) * w + (w - 1)
    return np.where(j <= last, j, lane)


def _ballot_bits(m: Machine, pred: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per lane: the 32-bit ballot of its warp over `pred & mask`."""
    wid = _warp_id(m)
    n_warps = int(wid[-1]) + 1 if m.geo.n else 0
    bits = np.zeros(n_warps, dtype=np.uint64)
    on = pred & mask
    contrib = np.left_shift(np.uint64(1), _lane_id(m).astype(np.uint64))
    np.bitwise_or.at(bits, wid[on], contrib[on])
    return bits[wid].astype(np.uint32)


def _pred(m: Machine, v: Val) -> np.ndarray:
    return np.broadcast_to(np.asarray(v.data != 0), (m.geo.n,))


def _ballot(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    _check_mask(m, args[0], mask, node)
    return Val(ct.UINT, _ballot_bits(m, _pred(m, args[1]), mask))


def _any(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    _check_mask(m, args[0], mask, node)
    return Val(ct.INT, (_ballot_bits(m, _pred(m, args[1]), mask) != 0).astype(np.int32))


def _all(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    _check_mask(m, args[0], mask, node)
    fails = _ballot_bits(m, ~_pred(m, args[1]), mask)
    return Val(ct.INT, (fails == 0).astype(np.int32))


def _activemask(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    return Val(ct.UINT, _ballot_bits(m, np.ones(m.geo.n, dtype=bool), mask))


WARP_OPS = {
    "__shfl_sync": _src_idx,
    "__shfl_up_sync": _src_up,
    "__shfl_down_sync": _src_down,
    "__shfl_xor_sync": _src_xor,
}


def _shfl(src_of: Callable[[np.ndarray, np.ndarray, int], np.ndarray]) -> Callable[..., Val]:
    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        return _shuffle(m, args, mask, node, src_of)

    return call


WARP: dict[str, Callable[..., Val]] = {
    **{name: _shfl(fn) for name, fn in WARP_OPS.items()},
    "__ballot_sync": _ballot,
    "__any_sync": _any,
    "__all_sync": _all,
    "__activemask": _activemask,
}
