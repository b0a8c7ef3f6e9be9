"""Hand-written NKI for corpus/bias_gelu_2d.cu (out = gelu_erf(x[R, C] + bias[C])), to compare.

Rows go on the 128 partitions and up to 2048 columns of each row on the free axis (contiguous
row segments per DMA); the ragged row and column edges are masks, the CUDA guard
`row < rows && col < cols`. The bias chunk is loaded once per column chunk as a [1, F] row and
broadcast across the partitions, then reused by every row tile (the CUDA block's shared bias
reads). Row tiles go in groups of up to 8 whose loads are issued first, so stores overlap the
remaining loads. Per tile: one VectorE add in fp32, then the exact erf GELU as one ScalarE
activation. bias_gelu_2d(x, bias) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 2048  # columns per tile: up to 8 KiB contiguous per partition row
GROUP = 8  # row tiles whose loads are issued together


@nki.jit
def bias_gelu_2d(x, bias):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    n_c = (C + F_MAX - 1) // F_MAX
    fc = (C + n_c - 1) // n_c  # balanced column chunks
    n_r = (R + P_TILE - 1) // P_TILE
    group = min(GROUP, n_r)
    for c in nl.affine_range(n_c):
        i_f = c * fc + nl.arange(fc)[None, :]  # col = blockIdx.x * 32 + threadIdx.x
        b_row = nl.load(bias[i_f], mask=i_f < C)
        b_tile = nl.broadcast_to(b_row, (P_TILE, fc))  # bias[col], shared by every row
        for g in nl.affine_range((n_r + group - 1) // group):
            x_t = nl.ndarray((group, nl.par_dim(P_TILE), fc), dtype=x.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(group):
                i_p = (g * group + k) * P_TILE + nl.arange(P_TILE)[:, None]  # row
                x_t[k] = nl.load(x[i_p, i_f], mask=(i_p < R) & (i_f < C))
            for k in nl.affine_range(group):
                i_p = (g * group + k) * P_TILE + nl.arange(P_TILE)[:, None]
                ok = (i_p < R) & (i_f < C)  # row < rows && col < cols
                v = nl.add(x_t[k], b_tile)  # x[idx] + bias[col] in fp32
                # 0.5f * v * (1.0f + erff(v * M_SQRT1_2)) on ScalarE
                nl.store(out[i_p, i_f], value=nl.gelu(v), mask=ok)
    return out
