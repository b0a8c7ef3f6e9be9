"""1-D stencil: weighted sum of 7 neighbours, zero outside the array

Migrated by cuda2nki from stencil_1d.cu (kernel `stencil_1d_kernel`, family stencil, 1d),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    stencil_1d(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="stencil_1d_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


P_TILE = 128  # partitions per tile
F_TILE = 512  # elements per partition
LOW = -3  # offset of the first tap (-radius)

# from stencil_1d.cu:10 — __constant__ c_weights[7]
WEIGHTS = [0.02, -0.05, 0.15, 0.5, 0.25, 0.1, 0.03]


def _copy_flat(dst, d0, src, s0, count, cols):
    """DMA src[s0 : s0 + count] into the row-major flat range [d0, d0 + count) of the tile dst:
    whole rows at once, partial rows at either end (trace-time Python, unrolled)."""
    while count > 0:
        r, c = divmod(d0, cols)
        if c == 0 and count >= cols:
            rows = count // cols
            nisa.dma_copy(dst=dst[r : r + rows, 0:cols], src=src[s0 : s0 + rows * cols].reshape((rows, cols)))
            step = rows * cols
        else:
            step = min(cols - c, count)
            nisa.dma_copy(dst=dst[r : r + 1, c : c + step], src=src[s0 : s0 + step].reshape((1, step)))
        d0, s0, count = d0 + step, s0 + step, count - step


@nki.jit
def stencil_1d(x):
    N = x.shape[0]

    out = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)

    # from stencil_1d.cu:13 — shared tile with halos: each tap is a shifted load instead, zero outside the array
    done = 0
    while done < N:
        count = min(P_TILE * F_TILE, N - done)
        rows, cols = (count // F_TILE, F_TILE) if count >= F_TILE else (1, count)
        n = rows * cols
        acc = nl.zeros((P_TILE, F_TILE), dtype=nl.float32, buffer=nl.sbuf)
        for j, w in enumerate(WEIGHTS):
            # this chunk shifted by the tap's offset, cut to the array; outside it stays zero
            shift = done + LOW + j
            first, last = max(0, shift), min(N, shift + n)
            tap = nl.zeros((P_TILE, F_TILE), dtype=nl.float32, buffer=nl.sbuf)
            if last > first:
                _copy_flat(tap, first - shift, x, first, last - first, cols)
            acc = nl.add(acc, nl.multiply(tap, w))
        # from stencil_1d.cu:32 — out[gidx] = acc;
        nl.store(out[done : done + n].reshape((rows, cols)), value=acc[0:rows, 0:cols])
        done += n
    return out
