"""Hand-written NKI for corpus/transpose_tiled.cu (out[C, R] = in[R, C]^T), to compare.

The CUDA kernel's padded 32x33 shared tile becomes TensorE
transposes of 128x128 blocks into PSUM. Work goes by super-blocks of up to 512 x 512: up to
four 128-row strips are loaded with contiguous row segments (up to 2 KiB per partition), each
128-column block of the strips is transposed into one PSUM bank [128, 512], evacuated once to
SBUF and stored as contiguous output row segments, so neither side uses element-strided DMAs.
Ragged edges are masked; strips with missing rows start zeroed (a PE transpose is a matmul with
the identity, so garbage in a padding row would reach every output of its column).
transpose_tiled(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

TB = 128  # TensorE transpose block (partitions x free)
SUPER = 512  # super-block side: 4 blocks, one fp32 PSUM bank per output tile


@nki.jit
def transpose_tiled(x):
    R, C = x.shape
    out = nl.ndarray((C, R), dtype=x.dtype, buffer=nl.shared_hbm)
    n_strips = min(SUPER // TB, (R + TB - 1) // TB)  # 128-row strips per super-block
    H = n_strips * TB  # super-block rows (output tile width)
    W = min(SUPER, (C + TB - 1) // TB * TB)  # super-block columns, whole 128-blocks
    # padding columns only reach output rows >= C, which the store masks; padding rows need zeros
    ragged = R % TB != 0
    for rs in nl.affine_range((R + H - 1) // H):
        for cs in nl.affine_range((C + W - 1) // W):
            # the CUDA tile load: rows y + j, columns x, guarded on both
            if ragged:
                strips = nl.zeros((n_strips, nl.par_dim(TB), W), dtype=x.dtype, buffer=nl.sbuf)
            else:
                strips = nl.ndarray((n_strips, nl.par_dim(TB), W), dtype=x.dtype, buffer=nl.sbuf)
            i_f = cs * W + nl.arange(W)[None, :]
            for s in nl.affine_range(n_strips):
                i_p = rs * H + s * TB + nl.arange(TB)[:, None]
                strips[s] = nl.load(x[i_p, i_f], mask=(i_p < R) & (i_f < C))
            # the CUDA tile write-out: tile[threadIdx.x][threadIdx.y + j] to odata rows = in cols
            for j in nl.affine_range(W // TB):
                t_psum = nl.ndarray((TB, H), dtype=nl.float32, buffer=nl.psum)
                for s in nl.affine_range(n_strips):
                    t_psum[:, nl.ds(s * TB, TB)] = nl.transpose(strips[s, :, nl.ds(j * TB, TB)])
                o_p = cs * W + j * TB + nl.arange(TB)[:, None]  # output row = input column
                o_f = rs * H + nl.arange(H)[None, :]  # output column = input row
                t_out = nl.copy(t_psum, dtype=x.dtype)
                nl.store(out[o_p, o_f], value=t_out, mask=(o_p < C) & (o_f < R))
    return out
