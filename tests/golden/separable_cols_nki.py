"""2-D stencil: weighted sum of 11 neighbours, zero outside the image

Migrated by cuda2nki from separable_cols.cu (kernel `separable_cols_kernel`, family stencil, 2d).
Calling convention (cuda2nki task contract 1.0):
    separable_cols(img, c_taps) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="separable_cols_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # partitions per tile
F_TILE = 512  # elements per partition

# from separable_cols.cu:15 — the 11 weights of c_taps: one [1, n] load, broadcast to the partitions as per-partition scalars
N_TAPS = 11
# (row offset, column offset, index into c_taps) per tap
TAPS = [(-5, 0, 0), (-4, 0, 1), (-3, 0, 2), (-2, 0, 3), (-1, 0, 4), (0, 0, 5), (1, 0, 6), (2, 0, 7), (3, 0, 8), (4, 0, 9), (5, 0, 10)]


@nki.jit
def separable_cols(img, c_taps):
    H = img.shape[0]
    W = img.shape[1]

    out = nl.ndarray((H, W), dtype=nl.float32, buffer=nl.shared_hbm)

    # from separable_cols.cu:15 — 11 taps over 11 row offset(s): one zero-filled load per row offset with every column a tap reaches (zero outside the image), each tap a free-axis slice of it
    # the weights, once: a [1, n] load broadcast to every partition
    w_row = nl.load(c_taps.reshape((1, N_TAPS))[nl.arange(1)[:, None], nl.arange(N_TAPS)[None, :]])
    w_all = nl.copy(nl.broadcast_to(w_row, (P_TILE, N_TAPS)))
    # from separable_cols.cu:15 — 11 taps down the columns as one banded matrix product: out_tile = band^T @ rows (128 rows and the 10 past them, zero outside the image), the band w[p - m] built once from the weights; as in any product, a non-finite pixel reaches every output row of its tile
    dy_low = min(dy for dy, _, _ in TAPS)
    span = max(dy for dy, _, _ in TAPS) - dy_low  # input rows past a tile's P_TILE
    dx = TAPS[0][1]  # the one column offset
    i_q = nl.arange(P_TILE)[:, None]
    i_s = nl.arange(span)[:, None]
    i_m = nl.arange(P_TILE)[None, :]
    # band[p, m]: the weight of the tap reading input row p (from the tile's first) for
    # output row m; the rows past the tile's P_TILE in a second band
    diff_a = nisa.iota(i_q - i_m, dtype=nl.float32)
    diff_b = nisa.iota(i_s + P_TILE - i_m, dtype=nl.float32)
    band_a = nl.zeros((P_TILE, P_TILE), dtype=nl.float32, buffer=nl.sbuf)
    band_b = nl.zeros((span, P_TILE), dtype=nl.float32, buffer=nl.sbuf)
    for dy, _, w in TAPS:
        band_a = nl.add(band_a, nisa.tensor_scalar(diff_a, op0=nl.equal, operand0=float(dy - dy_low), op1=nl.multiply, operand1=w_all[:, w : w + 1]))
        band_b = nl.add(band_b, nisa.tensor_scalar(diff_b, op0=nl.equal, operand0=float(dy - dy_low), op1=nl.multiply, operand1=w_all[0:span, w : w + 1]))
    ft = min(F_TILE, W)  # one PSUM bank of fp32 at most
    i_f = nl.arange(ft)[None, :]
    for r in nl.affine_range((H + P_TILE - 1) // P_TILE):
        for col in nl.affine_range((W + ft - 1) // ft):
            c_f = col * ft + i_f
            s_c = c_f + dx
            s_a = r * P_TILE + dy_low + i_q
            s_b = r * P_TILE + dy_low + P_TILE + i_s
            rows_a = nl.zeros((P_TILE, ft), dtype=nl.float32, buffer=nl.sbuf)
            rows_a[...] = nl.load(img[s_a, s_c], mask=(s_a >= 0) & (s_a < H) & (s_c >= 0) & (s_c < W))
            rows_b = nl.zeros((span, ft), dtype=nl.float32, buffer=nl.sbuf)
            rows_b[...] = nl.load(img[s_b, s_c], mask=(s_b >= 0) & (s_b < H) & (s_c >= 0) & (s_c < W))
            acc = nl.zeros((P_TILE, ft), dtype=nl.float32, buffer=nl.psum)
            acc += nl.matmul(band_a, rows_a, transpose_x=True)
            acc += nl.matmul(band_b, rows_b, transpose_x=True)
            i_p = r * P_TILE + i_q
            # from separable_cols.cu:15 — lifted: out[i, j] = sum_{k < 11} (c_taps[k] * zeropad(img)[i + k - 5, j])
            nl.store(out[i_p, c_f], value=nl.copy(acc, dtype=nl.float32), mask=(i_p < H) & (c_f < W))
    return out
