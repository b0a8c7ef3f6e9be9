"""Hand-written NKI for corpus/separable_rows.cu (row pass of a separable convolution).

Image rows on the partitions, columns on the free axis: one masked load per tile brings a
tile's columns and the R-pixel halo on both sides into a zeroed tile (pixels past the image
read 0, as the CUDA halo stores them), so each of the K taps is a free-axis slice of it. The K
weights (the __constant__ table) are loaded once and broadcast to the partitions; the taps are
a chain of VectorE multiply-adds (w[t] * slice + acc) in the CUDA order.
separable_rows(img, c_taps) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def separable_rows(img, c_taps):
    H, W = img.shape
    K = c_taps.shape[0]
    R = K // 2
    out = nl.ndarray((H, W), dtype=img.dtype, buffer=nl.shared_hbm)
    w_row = nl.load(c_taps.reshape((1, K))[nl.arange(1)[:, None], nl.arange(K)[None, :]])
    w_all = nl.copy(nl.broadcast_to(w_row, (P_TILE, K)))
    ft = min(F_TILE, W)
    i_q = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(ft)[None, :]
    i_h = nl.arange(ft + 2 * R)[None, :]
    for r in nl.affine_range((H + P_TILE - 1) // P_TILE):
        for c in nl.affine_range((W + ft - 1) // ft):
            rows = r * P_TILE + i_q
            src = c * ft - R + i_h  # the tile's columns and the halo on both sides
            seg = nl.zeros((P_TILE, ft + 2 * R), dtype=nl.float32, buffer=nl.sbuf)
            seg[...] = nl.load(img[rows, src], mask=(rows < H) & (src >= 0) & (src < W))
            acc = nisa.tensor_scalar(seg[:, 0:ft], op0=nl.multiply, operand0=w_all[:, 0:1])
            for t in nl.static_range(1, K):
                acc = nisa.scalar_tensor_tensor(data=seg[:, t : t + ft], op0=nl.multiply,
                                                operand0=w_all[:, t : t + 1], op1=nl.add,
                                                operand1=acc)  # fmt: skip
            cols = c * ft + i_f
            nl.store(out[rows, cols], value=acc, mask=(rows < H) & (cols < W))
    return out
