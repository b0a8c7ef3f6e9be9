"""Transpose: out[c, r] = in[r, c], one 128 x 128 tile at a time

Migrated by cuda2nki from transpose_tiled.cu (kernel `transpose_tiled_kernel`, family transpose, shared_tiled).
Calling convention (cuda2nki task contract 1.0):
    transpose_tiled(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="transpose_tiled_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


TILE = 128  # rows and columns per tile (pmax; TensorE transpose limit)


@nki.jit
def transpose_tiled(x):
    R = x.shape[0]
    C = x.shape[1]

    out = nl.ndarray((C, R), dtype=nl.float32, buffer=nl.shared_hbm)

    # from transpose_tiled.cu:12 — the shared-memory tile (and its bank-conflict padding) becomes an SBUF tile; the Tensor engine transposes it, so no padding is needed
    for i in nl.affine_range((R + TILE - 1) // TILE):
        for j in nl.affine_range((C + TILE - 1) // TILE):
            i_p = i * TILE + nl.arange(TILE)[:, None]
            i_f = j * TILE + nl.arange(TILE)[None, :]
            tile = nl.zeros((TILE, TILE), dtype=nl.float32, buffer=nl.sbuf)
            tile[...] = nl.load(x[i_p, i_f], mask=(i_p < R) & (i_f < C))
            flipped = nl.copy(nl.transpose(tile), dtype=nl.float32)
            # from transpose_tiled.cu:29 — odata[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
            o_p = j * TILE + nl.arange(TILE)[:, None]
            o_f = i * TILE + nl.arange(TILE)[None, :]
            nl.store(out[o_p, o_f], value=flipped, mask=(o_p < C) & (o_f < R))
    return out
