"""Elementwise map: out = nl.add(nl.multiply(alpha, x_tile), beta)

Migrated by cuda2nki from scale_2d_pitch.cu (kernel `scale_2d_pitch_kernel`, family elementwise, 2d).
Calling convention (cuda2nki task contract 1.0):
    scale_2d_pitch(x, *, alpha, beta) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="scale_2d_pitch_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # partitions per tile (nl.tile_size.pmax)
F_TILE = 512  # elements per partition per tile: 2 KiB fp32 DMAs


@nki.jit
def scale_2d_pitch(x, *, alpha, beta):
    R = x.shape[0]
    C = x.shape[1]

    out = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)

    # from scale_2d_pitch.cu:16 — one CUDA thread per element
    # Rows go on the partitions (P_TILE per tile), columns along the free axis (F_TILE per tile).
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        for col in nl.affine_range((C + F_TILE - 1) // F_TILE):
            i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
            i_f = col * F_TILE + nl.arange(F_TILE)[None, :]
            # from scale_2d_pitch.cu:15 — bounds guard `row < rows && col < cols` becomes the tile mask
            in_bounds = (i_p < R) & (i_f < C)
            x_tile = nl.load(x[i_p, i_f], mask=in_bounds)
            # from scale_2d_pitch.cu:16 — out[row * ld_out + col] = alpha * in[row * ld_in + col] + beta;
            nl.store(out[i_p, i_f], value=nisa.tensor_scalar(x_tile, op0=nl.multiply, operand0=alpha, reverse0=False, op1=nl.add, operand1=beta, reverse1=False), mask=in_bounds)
    return out
