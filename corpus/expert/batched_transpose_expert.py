"""Hand-written NKI for corpus/batched_transpose.cu (out[b] = in[b]^T over [Bt, R, C]), to compare.

Each matrix of the batch (the CUDA blockIdx.z) is transposed independently: the padded 32x33
shared tile becomes TensorE transposes of up-to-128x128 blocks into PSUM. Per matrix, work goes
by super-blocks of up to 512 rows x 512 columns: strips of up to 128 rows (fewer when R < 128,
so short matrices waste no partitions) are loaded with contiguous row segments, each 128-column
block of the strips is transposed into one PSUM bank, evacuated once to SBUF and stored as
contiguous output row segments. Ragged edges are masked; strips with missing rows start zeroed
(a PE transpose is a matmul with the identity, so garbage in a padding row would reach every
output of its column). batched_transpose(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

TB = 128  # TensorE transpose block (partitions x free)
SUPER = 512  # super-block side: one fp32 PSUM bank per output tile


@nki.jit
def batched_transpose(x):
    Bt, R, C = x.shape
    out = nl.ndarray((Bt, C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    TP = min(TB, R)  # rows per strip
    n_strips = min(SUPER // TB, (R + TP - 1) // TP)  # strips per super-block
    H = n_strips * TP  # super-block rows (output tile width)
    W = min(SUPER, (C + TB - 1) // TB * TB)  # super-block columns, whole 128-blocks
    # padding columns only reach output rows >= C, which the store masks; padding rows need zeros
    ragged = R % TP != 0
    for b in nl.affine_range(Bt):  # blockIdx.z selects the matrix
        for rs in nl.affine_range((R + H - 1) // H):
            for cs in nl.affine_range((C + W - 1) // W):
                # src[(y + j) * cols + x], guarded on both coordinates
                if ragged:
                    strips = nl.zeros((n_strips, nl.par_dim(TP), W), dtype=x.dtype, buffer=nl.sbuf)
                else:
                    strips = nl.ndarray(
                        (n_strips, nl.par_dim(TP), W), dtype=x.dtype, buffer=nl.sbuf
                    )
                i_f = cs * W + nl.arange(W)[None, :]
                for s in nl.affine_range(n_strips):
                    i_p = rs * H + s * TP + nl.arange(TP)[:, None]
                    strips[s] = nl.load(x[b, i_p, i_f], mask=(i_p < R) & (i_f < C))
                # dst[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j]
                for j in nl.affine_range(W // TB):
                    t_psum = nl.ndarray((TB, H), dtype=nl.float32, buffer=nl.psum)
                    for s in nl.affine_range(n_strips):
                        t_psum[:, nl.ds(s * TP, TP)] = nl.transpose(strips[s, :, nl.ds(j * TB, TB)])
                    o_p = cs * W + j * TB + nl.arange(TB)[:, None]  # output row = input column
                    o_f = rs * H + nl.arange(H)[None, :]  # output column = input row
                    t_out = nl.copy(t_psum, dtype=x.dtype)
                    nl.store(out[b, o_p, o_f], value=t_out, mask=(o_p < C) & (o_f < R))
    return out
