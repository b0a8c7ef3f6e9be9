"""Hand-written NKI for corpus/mean_rows_cg.cu (row means of [R, C]), to compare.

One thread_block_tile<32> per row becomes one partition per row, with row r = p * T + t
(T = ceil(R / 128)): tile t loads whole contiguous rows, the loads run back to back, and one DMA
stores every mean. The strided loop and the warp.shfl_down tree are one fp32 VectorE free-axis
sum per chunk of up to 2048 columns, then the same fp32 division by cols as the CUDA.
mean_rows_cg(x) -> mean
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_CHUNK = 2048  # 8 KiB per partition row per DMA


@nki.jit
def mean_rows_cg(x):
    R, C = x.shape
    mean = nl.ndarray((R,), dtype=x.dtype, buffer=nl.shared_hbm)
    T = (R + P_TILE - 1) // P_TILE  # rows per partition
    n_full = C // F_CHUNK
    last = C - n_full * F_CHUNK
    n_cols = n_full + (1 if last > 0 else 0)  # column chunks per row
    i_q = nl.arange(P_TILE)[:, None]
    i_1 = nl.arange(1)[None, :]
    # partials[p, t * n_cols + c]: chunk c of row p * T + t (disjoint columns per iteration)
    partials = nl.ndarray((P_TILE, T * n_cols), dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.affine_range(T):
        i_r = i_q * T + t  # row = blockIdx.x * meta_group_size() + meta_group_rank()
        ok = i_r < R  # the tile-uniform return for row >= rows
        for c in nl.affine_range(n_full):
            i_f = c * F_CHUNK + nl.arange(F_CHUNK)[None, :]
            x_tile = nl.load(x[i_r, i_f], mask=ok)
            # for (c = thread_rank(); c < cols; c += 32) sum += xr[c]; then the shfl_down tree
            partials[i_q, t * n_cols + c + i_1] = nl.sum(x_tile, axis=1, dtype=nl.float32, mask=ok)
        if last > 0:
            i_f = n_full * F_CHUNK + nl.arange(last)[None, :]
            x_tile = nl.load(x[i_r, i_f], mask=ok)
            partials[i_q, t * n_cols + n_full + i_1] = nl.sum(
                x_tile, axis=1, dtype=nl.float32, mask=ok
            )
    i_t = nl.arange(T)[None, :]
    valid = i_q * T + i_t < R
    sums = partials
    if n_cols > 1:  # fold the column chunks of every row at once
        i_t3 = nl.arange(T)[None, :, None]
        i_c3 = nl.arange(n_cols)[None, None, :]
        sums = nl.sum(partials[i_q[:, :, None], i_t3 * n_cols + i_c3], axis=2)
    # mean[row] = sum / static_cast<float>(cols), every row in one store
    means = nl.divide(sums, float(C), mask=valid)
    nl.store(mean[i_q * T + i_t], value=means, mask=valid)
    return mean
