"""2-D stencil: weighted sum of 11 neighbours, zero outside the image

Migrated by cuda2nki from separable_rows.cu (kernel `separable_rows_kernel`, family stencil, 2d).
Calling convention (cuda2nki task contract 1.0):
    separable_rows(img, c_taps) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="separable_rows_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # partitions per tile
F_TILE = 512  # elements per partition

# from separable_rows.cu:16 — the 11 weights of c_taps: one [1, n] load, broadcast to the partitions as per-partition scalars
N_TAPS = 11
# (row offset, column offset, index into c_taps) per tap
TAPS = [(0, -5, 0), (0, -4, 1), (0, -3, 2), (0, -2, 3), (0, -1, 4), (0, 0, 5), (0, 1, 6), (0, 2, 7), (0, 3, 8), (0, 4, 9), (0, 5, 10)]


@nki.jit
def separable_rows(img, c_taps):
    H = img.shape[0]
    W = img.shape[1]

    out = nl.ndarray((H, W), dtype=nl.float32, buffer=nl.shared_hbm)

    # from separable_rows.cu:16 — 11 taps over 1 row offset(s): one zero-filled load per row offset with every column a tap reaches (zero outside the image), each tap a free-axis slice of it
    # the weights, once: a [1, n] load broadcast to every partition
    w_row = nl.load(c_taps.reshape((1, N_TAPS))[nl.arange(1)[:, None], nl.arange(N_TAPS)[None, :]])
    w_all = nl.copy(nl.broadcast_to(w_row, (P_TILE, N_TAPS)))
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
                rows[...] = nl.load(img[s_p, s_h], mask=inside)
                for ty, dx, w in TAPS:
                    if ty == dy:  # the first tap w * x, then acc + w * x as one VectorE instruction
                        tap = rows[:, dx - dx_low : dx - dx_low + ft]
                        wk = w_all[:, w : w + 1]  # the tap's weight, one per partition
                        acc = nisa.tensor_scalar(tap, op0=nl.multiply, operand0=wk) if acc is None else nisa.scalar_tensor_tensor(data=tap, op0=nl.multiply, operand0=wk, op1=nl.add, operand1=acc)
            # from separable_rows.cu:16 — lifted: out[i, j] = sum_{k < 11} (c_taps[k] * zeropad(img)[i, j + k - 5])
            nl.store(out[i_p, i_f], value=acc, mask=(i_p < H) & (i_f < W))
    return out
