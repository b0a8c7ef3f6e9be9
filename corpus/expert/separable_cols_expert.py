"""Hand-written NKI for corpus/separable_cols.cu (column pass of a separable convolution).

The column pass is a banded matrix product: output rows r0 .. r0 + 127 of a tile are the K-tap
sums of input rows r0 - R .. r0 + 127 + R, so out_tile = band^T @ rows, the band holding
w[p - m] at (input row p, output row m). The band is built once from the K weights (an iota
of p - m compared with each tap offset, times the tap's weight), split in two: the first 128
input rows and the 2R rows past them (TensorE contracts at most 128 partitions). Each tile is
two zero-filled masked loads (rows past the image read 0) and two fp32 matmuls accumulating
in one PSUM bank, then one copy out. separable_cols(img, c_taps) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512  # one PSUM bank of fp32


@nki.jit
def separable_cols(img, c_taps):
    H, W = img.shape
    K = c_taps.shape[0]
    R = K // 2
    out = nl.ndarray((H, W), dtype=img.dtype, buffer=nl.shared_hbm)
    # the K weights on every partition, as per-partition scalars
    w_row = nl.load(c_taps.reshape((1, K))[nl.arange(1)[:, None], nl.arange(K)[None, :]])
    w_all = nl.copy(nl.broadcast_to(w_row, (P_TILE, K)))
    i_p = nl.arange(P_TILE)[:, None]
    i_h = nl.arange(2 * R)[:, None]
    i_m = nl.arange(P_TILE)[None, :]
    # band_a[p, m] = w[p - m], band_b[q, m] = w[128 + q - m] (zero off the band)
    diff_a = nisa.iota(i_p - i_m, dtype=nl.float32)
    diff_b = nisa.iota(i_h + P_TILE - i_m, dtype=nl.float32)
    band_a = nl.zeros((P_TILE, P_TILE), dtype=nl.float32, buffer=nl.sbuf)
    band_b = nl.zeros((2 * R, P_TILE), dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.static_range(K):
        band_a = nl.add(
            band_a,
            nisa.tensor_scalar(
                diff_a,
                op0=nl.equal,
                operand0=float(t),
                op1=nl.multiply,
                operand1=w_all[:, t : t + 1],
            ),
        )
        band_b = nl.add(
            band_b,
            nisa.tensor_scalar(
                diff_b,
                op0=nl.equal,
                operand0=float(t),
                op1=nl.multiply,
                operand1=w_all[0 : 2 * R, t : t + 1],
            ),
        )
    ft = min(F_TILE, W)
    i_f = nl.arange(ft)[None, :]
    for r in nl.affine_range((H + P_TILE - 1) // P_TILE):
        for c in nl.affine_range((W + ft - 1) // ft):
            cols = c * ft + i_f
            s_a = r * P_TILE - R + i_p  # the tile's input rows, then the 2R past them
            s_b = r * P_TILE - R + P_TILE + i_h
            xa = nl.zeros((P_TILE, ft), dtype=nl.float32, buffer=nl.sbuf)
            xa[...] = nl.load(img[s_a, cols], mask=(s_a >= 0) & (s_a < H) & (cols < W))
            xb = nl.zeros((2 * R, ft), dtype=nl.float32, buffer=nl.sbuf)
            xb[...] = nl.load(img[s_b, cols], mask=(s_b >= 0) & (s_b < H) & (cols < W))
            acc = nl.zeros((P_TILE, ft), dtype=nl.float32, buffer=nl.psum)
            acc += nl.matmul(band_a, xa, transpose_x=True)
            acc += nl.matmul(band_b, xb, transpose_x=True)
            rows = r * P_TILE + i_p
            nl.store(
                out[rows, cols], value=nl.copy(acc, dtype=img.dtype), mask=(rows < H) & (cols < W)
            )
    return out
