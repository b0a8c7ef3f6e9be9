"""Hand-written NKI for corpus/gelu.cu (tanh-approximation GELU, gelu_kernel<float>), to compare.

The grid-stride loop becomes tiles of 128 partitions x F contiguous elements of the flat vector
(F <= 512 fp32, 2 KiB per partition row, balanced so every tile is nearly full) with a mask for
the ragged end. gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))) is ScalarE's
gelu_apprx_tanh activation, one instruction per tile in fp32. Tiles go in groups of up to 8
whose loads are issued first, so stores overlap the remaining loads. gelu(x) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 512  # fp32 elements per partition row: 2 KiB DMA rows
GROUP = 8  # tiles whose loads are issued together


@nki.jit
def gelu(x):
    N = x.shape[0]
    y = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tile width
    group = min(GROUP, n_tiles)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    for g in nl.affine_range((n_tiles + group - 1) // group):
        x_t = nl.ndarray((group, nl.par_dim(P_TILE), F), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(group):
            idx = ((g * group + k) * P_TILE + i_p) * F + i_f
            x_t[k] = nl.load(x[idx], mask=idx < N)  # the grid-stride bound `i < n`
        for k in nl.affine_range(group):
            idx = ((g * group + k) * P_TILE + i_p) * F + i_f
            # static_cast<float>, gelu_tanh in fp32, static_cast<T> on the store
            nl.store(y[idx], value=nl.gelu_apprx_tanh(x_t[k], dtype=nl.float32), mask=idx < N)
    return y
