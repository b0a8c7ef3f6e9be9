"""Elementwise map: c = nl.add(a_tile, b_tile)

Migrated by cuda2nki from vector_add.cu (kernel `vector_add_kernel`, family elementwise, 1d),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    vector_add(a, b) -> c
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="vector_add_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


P_TILE = 128  # partitions per tile (nl.tile_size.pmax)
F_TILE = 512  # elements per partition per tile: 2 KiB fp32 DMAs


@nki.jit
def vector_add(a, b):
    N = a.shape[0]

    c = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)

    # from vector_add.cu:12 — one CUDA thread per element
    # The flat index space goes through in chunks of up to P_TILE rows of F_TILE elements; the
    # CUDA bounds guard becomes the cut of the last chunk (whole rows, then one partial row).
    done = 0
    while done < N:
        count = min(P_TILE * F_TILE, N - done)
        rows, cols = (count // F_TILE, F_TILE) if count >= F_TILE else (1, count)
        n = rows * cols
        a_tile_buf = nl.ndarray((P_TILE, F_TILE), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile_buf[0:rows, 0:cols], src=a[done : done + n].reshape((rows, cols)))
        a_tile = a_tile_buf[0:rows, 0:cols]
        b_tile_buf = nl.ndarray((P_TILE, F_TILE), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_tile_buf[0:rows, 0:cols], src=b[done : done + n].reshape((rows, cols)))
        b_tile = b_tile_buf[0:rows, 0:cols]
        # from vector_add.cu:12 — c[i] = a[i] + b[i];
        nl.store(c[done : done + n].reshape((rows, cols)), value=nl.add(a_tile, b_tile))
        done += n
    return c
