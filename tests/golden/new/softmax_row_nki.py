"""Row-wise softmax: each row reduced, then mapped, on one partition

Migrated by cuda2nki from softmax_row.cu (kernel `softmax_row_kernel`, family rowwise, softmax),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    softmax_row(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="softmax_row_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


P_TILE = 128  # rows per tile, one per partition (nl.tile_size.pmax)
MAX_ROW = 8192  # longest row kept whole on a partition (32 KiB fp32)


@nki.jit
def softmax_row(x):
    R = x.shape[0]
    C = x.shape[1]

    assert C <= MAX_ROW, "rows longer than MAX_ROW need a blocked two-pass version"
    out = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)

    # from softmax_row.cu:10 — one CUDA block per row (row offset blockIdx.x*cols)
    # from softmax_row.cu:40 — block_stride loop over c becomes the free axis
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        r0 = r * P_TILE
        rows = min(P_TILE, R - r0)
        x_buf = nl.ndarray((P_TILE, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_buf[0:rows, :], src=x[r0 : r0 + rows, :])
        x_tile = x_buf[0:rows, :]
        # from softmax_row.cu:24 — row max (shared_tree)
        row_max = nl.max(x_tile, axis=1)
        shifted = nl.subtract(x_tile, row_max)
        exps = nl.exp(shifted)
        # from softmax_row.cu:31 — row sum (loop_accumulate)
        row_sum = nl.sum(exps, axis=1)
        # from softmax_row.cu:40 — for (int c = tid; c < cols; c += blockDim.x) y[c] = expf(x[c] - row_max) * inv_sum;
        y = nl.multiply(exps, nl.reciprocal(row_sum))
        nl.store(out[r0 : r0 + rows, :], value=y)
    return out
