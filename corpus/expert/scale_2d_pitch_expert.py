"""Hand-written NKI for corpus/scale_2d_pitch.cu (out = alpha * in + beta over [R, C]), to compare.

Rows go on the 128 partitions and up to 2048 columns of each row on the free axis, so every
DMA moves whole contiguous row segments (the CUDA pitch ld_in/ld_out is the row stride of the
HBM views; the spec's rows are dense). The ragged row and column edges are masks, the CUDA
guard `row < rows && col < cols`. Row tiles go in groups of up to 8 whose loads are issued
first, so stores overlap the remaining loads; alpha * x + beta is one VectorE tensor_scalar
per tile, in fp32. scale_2d_pitch(x, *, alpha, beta) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 2048  # columns per tile: up to 8 KiB contiguous per partition row
GROUP = 8  # row tiles whose loads are issued together


@nki.jit
def scale_2d_pitch(x, *, alpha, beta):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    n_c = (C + F_MAX - 1) // F_MAX
    fc = (C + n_c - 1) // n_c  # balanced column chunks
    n_r = (R + P_TILE - 1) // P_TILE
    group = min(GROUP, n_r)
    for c in nl.affine_range(n_c):
        i_f = c * fc + nl.arange(fc)[None, :]  # col = blockIdx.x * 32 + threadIdx.x
        for g in nl.affine_range((n_r + group - 1) // group):
            x_t = nl.ndarray((group, nl.par_dim(P_TILE), fc), dtype=x.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(group):
                i_p = (g * group + k) * P_TILE + nl.arange(P_TILE)[:, None]  # row
                x_t[k] = nl.load(x[i_p, i_f], mask=(i_p < R) & (i_f < C))
            for k in nl.affine_range(group):
                i_p = (g * group + k) * P_TILE + nl.arange(P_TILE)[:, None]
                ok = (i_p < R) & (i_f < C)  # row < rows && col < cols
                # out[row * ld_out + col] = alpha * in[row * ld_in + col] + beta
                res = nisa.tensor_scalar(
                    x_t[k], op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=beta
                )
                nl.store(out[i_p, i_f], value=res, mask=ok)
    return out
