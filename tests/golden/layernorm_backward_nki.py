"""Row program: dx[i, j] = rstd[i] * (((-1.0 / C) * rstd[i] * (x[i, j] - mean[i]) * (sum_{k < C} (dy[i, k] * rstd[i] * (x[i, k] - mean[i]) * weight[k]))) + ((-1.0 / C) * (sum_{q < C} (dy[i, q] * weight[q]))) + (dy[i, j] * weight[j]))

Migrated by cuda2nki from layernorm_backward.cu (kernel `layernorm_backward_kernel`, family rows, lifted).
Calling convention (cuda2nki task contract 1.0):
    layernorm_backward(dy, x, weight, mean, rstd, dweight, dbias) -> dweight, dbias, dx
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="layernorm_backward_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # rows per tile, one per partition (nl.tile_size.pmax)
MAX_ROW = 8192  # longest row kept whole on a partition (32 KiB fp32)


@nki.jit
def layernorm_backward(dy, x, weight, mean, rstd, dweight, dbias):
    R = dy.shape[0]
    C = dy.shape[1]

    assert C <= MAX_ROW, "rows longer than MAX_ROW need a blocked two-pass version"
    dweight_out = nl.ndarray((C,), dtype=nl.float32, buffer=nl.shared_hbm)
    dbias_out = nl.ndarray((C,), dtype=nl.float32, buffer=nl.shared_hbm)
    dx = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)

    # from layernorm_backward.cu:20 — one row per partition; each reduction along the free axis
    i_f = nl.arange(C)[None, :]
    # sums down the columns: each row tile's term summed across the partitions by a
    # ones-vector matmul, accumulated in PSUM (one bank per 512 columns) over the row tiles
    W_C = min(C, 512)
    n_cc = (C + W_C - 1) // W_C
    ones = nl.full((P_TILE, 1), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    i_a = nl.arange(P_TILE)[:, None]
    cs0_acc = [nl.zeros((1, min(W_C, C - cc * W_C)), dtype=nl.float32, buffer=nl.psum) for cc in range(n_cc)]
    cs1_acc = [nl.zeros((1, min(W_C, C - cc * W_C)), dtype=nl.float32, buffer=nl.psum) for cc in range(n_cc)]
    weight_vec = nl.load(weight[i_f])  # a row vector, [1, cols]
    # Row r * n_t + t on partition r, t = 0 .. n_t - 1: each partition's per-row values are
    # contiguous, so they load and store in one DMA each rather than one per row tile.
    n_t = (R + P_TILE - 1) // P_TILE
    i_q = nl.arange(P_TILE)[:, None]
    i_t = nl.arange(n_t)[None, :]
    i_1 = nl.arange(1)[None, :]
    all_ok = i_q * n_t + i_t < R
    rstd_col_all = nl.load(rstd[i_q * n_t + i_t], mask=all_ok)
    mean_col_all = nl.load(mean[i_q * n_t + i_t], mask=all_ok)
    for t in nl.affine_range(n_t):
        i_p = i_q * n_t + t
        rows_ok = i_p < R
        rstd_col = rstd_col_all[i_q, t + i_1]
        mean_col = mean_col_all[i_q, t + i_1]
        dy_row = nl.load(dy[i_p, i_f], mask=rows_ok)
        x_row = nl.load(x[i_p, i_f], mask=rows_ok)
        rc0 = nl.multiply(dy_row, weight_vec)  # read by several of the row's results
        rc1 = nl.subtract(x_row, mean_col)  # read by several of the row's results
        rc2 = nisa.scalar_tensor_tensor(data=dy_row, op0=nl.multiply, operand0=rstd_col, op1=nl.multiply, operand1=rc1, dtype=nl.float32)  # read by several of the row's results
        # sum along the row: sum_{k < C} (dy[i, k] * rstd[i] * (x[i, k] - mean[i]) * weight[k])
        red0 = nl.sum(nl.multiply(rc2, weight_vec), axis=1, keepdims=True)
        # sum along the row: sum_{q < C} (dy[i, q] * weight[q])
        red1 = nl.sum(rc0, axis=1, keepdims=True)
        # from layernorm_backward.cu:20 — lifted: dx[i, j] = rstd[i] * (((-1.0 / C) * rstd[i] * (x[i, j] - mean[i]) * (sum_{k < C} (dy[i, k] * rstd[i] * (x[i, k] - mean[i]) * weight[k]))) + ((-1.0 / C) * (sum_…
        nl.store(dx[i_p, i_f], value=nisa.tensor_scalar(nisa.scalar_tensor_tensor(data=rc1, op0=nl.multiply, operand0=nl.multiply(nl.multiply((-1.0 / C), rstd_col), red0), op1=nl.add, operand1=rc0, dtype=nl.float32), op0=nl.add, operand0=((-1.0 / C) * red1), reverse0=False, op1=nl.multiply, operand1=rstd_col, reverse1=False, dtype=nl.float32), mask=rows_ok)
        row_ok = nl.less(nisa.iota(i_p, dtype=nl.int32), R)  # rows past the end add nothing
        # from layernorm_backward.cu:20 — lifted: dweight[i] = dweight[i] + (sum_{k < R} (dy[k, i] * rstd[k] * (x[k, i] - mean[k])))
        cs0_t = nl.where(row_ok, rc2, 0.0, dtype=nl.float32)
        for cc in range(n_cc):
            i_c = cc * W_C + nl.arange(min(W_C, C - cc * W_C))[None, :]
            cs0_acc[cc] += nl.matmul(ones, cs0_t[i_a, i_c], transpose_x=True)
        # from layernorm_backward.cu:20 — lifted: dbias[i] = dbias[i] + (sum_{k < R} dy[k, i])
        cs1_t = nl.where(row_ok, dy_row, 0.0, dtype=nl.float32)
        for cc in range(n_cc):
            i_c = cc * W_C + nl.arange(min(W_C, C - cc * W_C))[None, :]
            cs1_acc[cc] += nl.matmul(ones, cs1_t[i_a, i_c], transpose_x=True)
    for cc in range(n_cc):
        i_c = cc * W_C + nl.arange(min(W_C, C - cc * W_C))[None, :]
        nl.store(dweight_out[i_c], value=nl.add(cs0_acc[cc], nl.load(dweight[i_c])))
    for cc in range(n_cc):
        i_c = cc * W_C + nl.arange(min(W_C, C - cc * W_C))[None, :]
        nl.store(dbias_out[i_c], value=nl.add(cs1_acc[cc], nl.load(dbias[i_c])))
    return dweight_out, dbias_out, dx
