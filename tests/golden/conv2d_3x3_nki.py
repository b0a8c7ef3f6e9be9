"""2-D stencil: weighted sum of 9 neighbours, zero outside the image

Migrated by cuda2nki from conv2d_3x3.cu (kernel `conv2d_3x3_kernel`, family stencil, 2d).
Calling convention (cuda2nki task contract 1.0):
    conv2d_3x3(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="conv2d_3x3_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


P_TILE = 128  # partitions per tile
F_TILE = 512  # elements per partition

# from conv2d_3x3.cu:9 — __constant__ c_w[9]
# (row offset, column offset, weight) per tap
TAPS = [(-1, -1, 0.0625), (-1, 0, 0.125), (-1, 1, 0.0625), (0, -1, 0.125), (0, 0, 0.25), (0, 1, 0.125), (1, -1, 0.0625), (1, 0, -0.125), (1, 1, 0.0625)]


@nki.jit
def conv2d_3x3(x):
    H = x.shape[0]
    W = x.shape[1]

    out = nl.ndarray((H, W), dtype=nl.float32, buffer=nl.shared_hbm)

    # from conv2d_3x3.cu:15 — shared tile with halos: each tap is a shifted load instead, zero outside the array
    for r in nl.affine_range((H + P_TILE - 1) // P_TILE):
        for col in nl.affine_range((W + F_TILE - 1) // F_TILE):
            i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
            i_f = col * F_TILE + nl.arange(F_TILE)[None, :]
            acc = nl.zeros((P_TILE, F_TILE), dtype=nl.float32, buffer=nl.sbuf)
            for j in nl.static_range(len(TAPS)):
                dy, dx, w = TAPS[j]
                s_p = i_p + dy
                s_f = i_f + dx
                inside = (s_p >= 0) & (s_p < H) & (s_f >= 0) & (s_f < W)
                tap = nl.zeros((P_TILE, F_TILE), dtype=nl.float32, buffer=nl.sbuf)
                tap[...] = nl.load(x[s_p, s_f], mask=inside)
                acc[...] = nl.add(acc, nl.multiply(tap, w))
            # from conv2d_3x3.cu:37 — out[y * W + x] = acc;
            nl.store(out[i_p, i_f], value=acc, mask=(i_p < H) & (i_f < W))
    return out
