"""Elementwise map: c = nl.add(a_tile, b_tile)

Migrated by cuda2nki from vector_add.cu (kernel `vector_add_kernel`, family elementwise, 1d).
Calling convention (cuda2nki task contract 1.0):
    vector_add(a, b) -> c
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="vector_add_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


P_TILE = 128  # partitions per tile (nl.tile_size.pmax)
F_TILE = 512  # elements per partition per tile: 2 KiB fp32 DMAs


@nki.jit
def vector_add(a, b):
    N = a.shape[0]

    c = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)

    # from vector_add.cu:12 — one CUDA thread per element
    # The flat index space is cut into tiles of P_TILE partitions x F_TILE contiguous elements.
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F_TILE)[None, :]
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        # from vector_add.cu:11 — bounds guard `i < n` becomes the tile mask
        in_bounds = idx < N
        a_tile = nl.load(a[idx], mask=in_bounds)
        b_tile = nl.load(b[idx], mask=in_bounds)
        # from vector_add.cu:12 — c[i] = a[i] + b[i];
        nl.store(c[idx], value=nl.add(a_tile, b_tile), mask=in_bounds)
    return c
