"""Transpose: out[c, r] = in[r, c], by 128 x 128 TensorE transposes of super-blocks

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

SUPER = 512  # super-block side: 4 tiles; one fp32 PSUM bank per output tile


@nki.jit
def transpose_tiled(x):
    R = x.shape[0]
    C = x.shape[1]

    out = nl.ndarray((C, R), dtype=nl.float32, buffer=nl.shared_hbm)

    # from transpose_tiled.cu:12 — the shared-memory tile (and its bank-conflict padding) becomes an SBUF tile; the Tensor engine transposes it, so no padding is needed
    # super-blocks of up to SUPER x SUPER: 128-row strips loaded as contiguous row segments (up
    # to 2 KiB per partition), each 128-column block of them transposed into one PSUM bank
    # [TILE, sb_rows], copied out once and stored as contiguous output row segments
    n_strips = min(SUPER // TILE, (R + TILE - 1) // TILE)
    sb_rows = n_strips * TILE  # super-block rows: the width of each output tile
    sb_cols = min(SUPER, (C + TILE - 1) // TILE * TILE)  # whole 128-column blocks
    # rows past the end must read as zeros (a TensorE transpose is a matmul with the identity);
    # columns past the end only reach output rows the store masks off
    ragged = R % TILE != 0
    for rs in nl.affine_range((R + sb_rows - 1) // sb_rows):
        for cs in nl.affine_range((C + sb_cols - 1) // sb_cols):
            if ragged:
                strips = nl.zeros((n_strips, nl.par_dim(TILE), sb_cols), dtype=nl.float32, buffer=nl.sbuf)
            else:
                strips = nl.ndarray((n_strips, nl.par_dim(TILE), sb_cols), dtype=nl.float32, buffer=nl.sbuf)
            i_f = cs * sb_cols + nl.arange(sb_cols)[None, :]
            for strip in nl.affine_range(n_strips):
                i_p = rs * sb_rows + strip * TILE + nl.arange(TILE)[:, None]
                strips[strip] = nl.load(x[i_p, i_f], mask=(i_p < R) & (i_f < C))
            for j in nl.affine_range(sb_cols // TILE):
                flipped = nl.ndarray((TILE, sb_rows), dtype=nl.float32, buffer=nl.psum)
                for strip in nl.affine_range(n_strips):
                    flipped[:, nl.ds(strip * TILE, TILE)] = nl.transpose(strips[strip, :, nl.ds(j * TILE, TILE)])
                # from transpose_tiled.cu:29 — odata[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
                o_p = cs * sb_cols + j * TILE + nl.arange(TILE)[:, None]
                o_f = rs * sb_rows + nl.arange(sb_rows)[None, :]
                nl.store(out[o_p, o_f], value=nl.copy(flipped, dtype=nl.float32), mask=(o_p < C) & (o_f < R))
    return out
