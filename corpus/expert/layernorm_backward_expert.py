"""Hand-written NKI for corpus/layernorm_backward.cu (row layer norm backward), to compare.

Rows on the partitions (row p * n_t + t on partition p, so the per-row statistics load in one
DMA each). Per row tile: xhat = (x - mean) * rstd as one VectorE tensor_scalar (both per-row
scalars), g = w * dy, the two row means as free-axis sums, dx in two fused instructions. The column
gradients are the row tiles summed across the partitions: a ones-vector matmul per 512-column
PSUM bank, accumulated over the row tiles (rows past the end are zero-filled loads, statistics
included, so they add nothing).
layernorm_backward(dy, x, weight, mean, rstd, dweight, dbias) -> dweight, dbias, dx
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
BANK = 512  # fp32 columns per PSUM bank


@nki.jit
def layernorm_backward(dy, x, weight, mean, rstd, dweight, dbias):
    R, C = dy.shape
    dw_out = nl.ndarray((C,), dtype=nl.float32, buffer=nl.shared_hbm)
    db_out = nl.ndarray((C,), dtype=nl.float32, buffer=nl.shared_hbm)
    dx = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)
    n_t = (R + P_TILE - 1) // P_TILE
    n_b = (C + BANK - 1) // BANK
    i_q = nl.arange(P_TILE)[:, None]
    i_t = nl.arange(n_t)[None, :]
    i_1 = nl.arange(1)[None, :]
    i_f = nl.arange(C)[None, :]
    ok_all = i_q * n_t + i_t < R
    # rows past the end read as zeros (statistics, x and dy alike): their xhat and dy are 0,
    # so they add nothing to the column sums
    mu_all = nl.zeros((P_TILE, n_t), dtype=nl.float32, buffer=nl.sbuf)
    rs_all = nl.zeros((P_TILE, n_t), dtype=nl.float32, buffer=nl.sbuf)
    mu_all[...] = nl.load(mean[i_q * n_t + i_t], mask=ok_all)
    rs_all[...] = nl.load(rstd[i_q * n_t + i_t], mask=ok_all)
    w = nl.load(weight.reshape((1, C))[nl.arange(1)[:, None], i_f])
    w_all = nl.copy(nl.broadcast_to(w, (P_TILE, C)))
    ones = nl.full((P_TILE, 1), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    dw_acc = [nl.zeros((1, min(BANK, C - b * BANK)), dtype=nl.float32, buffer=nl.psum)
              for b in range(n_b)]  # fmt: skip
    db_acc = [nl.zeros((1, min(BANK, C - b * BANK)), dtype=nl.float32, buffer=nl.psum)
              for b in range(n_b)]  # fmt: skip
    inv_c = 1.0 / C
    for t in nl.affine_range(n_t):
        rows = i_q * n_t + t
        ok = rows < R
        mu, rs = mu_all[i_q, t + i_1], rs_all[i_q, t + i_1]
        d = nl.zeros((P_TILE, C), dtype=nl.float32, buffer=nl.sbuf)
        d[...] = nl.load(dy[rows, i_f], mask=ok)  # rows past the end stay 0
        xv = nl.zeros((P_TILE, C), dtype=nl.float32, buffer=nl.sbuf)
        xv[...] = nl.load(x[rows, i_f], mask=ok)
        xhat = nisa.tensor_scalar(xv, op0=nl.subtract, operand0=mu, op1=nl.multiply, operand1=rs)
        g = nisa.tensor_tensor(w_all, d, op=nl.multiply)
        g_mean = nl.multiply(nl.sum(g, axis=1, keepdims=True), inv_c)
        gx = nisa.tensor_tensor(g, xhat, op=nl.multiply)
        gx_mean = nl.multiply(nl.sum(gx, axis=1, keepdims=True), inv_c)
        # dx = rstd * ((g - g_mean) - xhat * gx_mean)
        t1 = nisa.scalar_tensor_tensor(
            data=xhat, op0=nl.multiply, operand0=gx_mean, op1=nl.subtract, operand1=g
        )  # xhat * gx_mean - g
        dxv = nisa.tensor_scalar(t1, op0=nl.add, operand0=g_mean, op1=nl.multiply,
                                 operand1=nl.multiply(rs, -1.0))  # fmt: skip
        nl.store(dx[rows, i_f], value=dxv, mask=ok)
        # column terms: xhat * dy and dy (both 0 past the end), summed across the partitions
        xd = nisa.tensor_tensor(xhat, d, op=nl.multiply)
        for b in range(n_b):
            cols = b * BANK + nl.arange(min(BANK, C - b * BANK))[None, :]
            dw_acc[b] += nl.matmul(ones, xd[i_q, cols], transpose_x=True)
            db_acc[b] += nl.matmul(ones, d[i_q, cols], transpose_x=True)
    for b in range(n_b):
        cols = b * BANK + nl.arange(min(BANK, C - b * BANK))[None, :]
        nl.store(dw_out[cols], value=nl.add(dw_acc[b], nl.load(dweight[cols])))
        nl.store(db_out[cols], value=nl.add(db_acc[b], nl.load(dbias[cols])))
    return dw_out, db_out, dx
