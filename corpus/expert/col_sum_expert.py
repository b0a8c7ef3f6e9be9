"""Hand-written NKI for corpus/col_sum.cu (column sums of [R, C]), to compare.

Rows go on the partitions (contiguous row-major DMAs) and the column sum is a partition-axis
reduction, so it runs on TensorE: a ones column as the stationary operand turns each [rows, 512]
tile into its [1, 512] column sums, accumulated over row tiles in fp32 PSUM (the threadIdx.y
loop and the shared fold); the ragged last row tile contracts over its exact row count.
col_sum(x) -> out
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512  # one PSUM bank of fp32 per matmul


@nki.jit
def col_sum(x):
    R, C = x.shape
    out = nl.ndarray((C,), dtype=x.dtype, buffer=nl.shared_hbm)
    W = min(C, F_TILE)
    n_rt = R // P_TILE  # full row tiles
    rr = R - n_rt * P_TILE  # rows in the ragged last tile
    ones = nl.ones((P_TILE, 1), dtype=x.dtype, buffer=nl.sbuf)
    i_q = nl.arange(P_TILE)[:, None]
    i_0 = nl.arange(1)[:, None]
    for cc in nl.affine_range((C + W - 1) // W):
        i_f = cc * W + nl.arange(W)[None, :]  # col = blockIdx.x * 32 + threadIdx.x
        ok = i_f < C  # the CUDA guard col < cols
        acc = nl.zeros((1, W), dtype=nl.float32, buffer=nl.psum)
        for rt in nl.affine_range(n_rt):
            x_tile = nl.load(x[rt * P_TILE + i_q, i_f], mask=ok)
            # for (r = ty; r < rows; r += 8) sum += in[r * cols + col]: ones^T @ x_tile on TensorE
            acc += nl.matmul(ones, x_tile, transpose_x=True)
        if rr > 0:
            i_r = nl.arange(rr)[:, None]
            x_tile = nl.load(x[n_rt * P_TILE + i_r, i_f], mask=ok)
            acc += nl.matmul(ones[i_r, i_0], x_tile, transpose_x=True)
        # if (ty == 0 && col < cols) out[col] = partial[0][tx]
        nl.store(out[i_f], value=nl.copy(acc, dtype=x.dtype), mask=ok)
    return out
