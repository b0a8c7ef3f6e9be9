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
import neuronxcc.nki.isa as nisa
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

    # from conv2d_3x3.cu:15 — shared tile with halos: one load per tile (per row offset in 2-D) brings the halo along, each tap is a free-axis slice of it, zero outside the array
    dx_low = min(dx for _, dx, _ in TAPS)
    width = max(dx for _, dx, _ in TAPS) - dx_low + 1
    row_offsets = list(dict.fromkeys(dy for dy, _, _ in TAPS))  # in the CUDA tap order
    ft = min(F_TILE, W)  # tile columns: no wider than the image
    i_h = nl.arange(ft + width - 1)[None, :]  # a tile's columns and their halo
    for r in nl.affine_range((H + P_TILE - 1) // P_TILE):
        for col in nl.affine_range((W + ft - 1) // ft):
            i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
            i_f = col * ft + nl.arange(ft)[None, :]
            acc = None
            for dy in row_offsets:
                # one load per row offset: the rows dy away, with the columns every tap reaches
                s_p = i_p + dy
                s_h = col * ft + i_h + dx_low
                inside = (s_p >= 0) & (s_p < H) & (s_h >= 0) & (s_h < W)
                rows = nl.zeros((P_TILE, ft + width - 1), dtype=nl.float32, buffer=nl.sbuf)
                rows[...] = nl.load(x[s_p, s_h], mask=inside)
                for ty, dx, w in TAPS:
                    if ty == dy:  # the first tap w * x, then acc + w * x as one VectorE instruction
                        tap = rows[:, dx - dx_low : dx - dx_low + ft]
                        acc = nl.multiply(tap, w) if acc is None else nisa.scalar_tensor_tensor(data=tap, op0=nl.multiply, operand0=w, op1=nl.add, operand1=acc)
            # from conv2d_3x3.cu:37 — out[y * W + x] = acc;
            nl.store(out[i_p, i_f], value=acc, mask=(i_p < H) & (i_f < W))
    return out
