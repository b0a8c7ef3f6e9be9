"""Legacy-dialect (neuronxcc.nki) kernels written for cuda2nki's emulator tests.

Written fresh in the style of the public NKI tutorials; imported only through
``migrator.nki.load_kernel_module`` so the ``neuronxcc`` imports resolve to the emulator.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def tensor_add(a_input, b_input):
    """One 128x512 tile per SPMD instance; launch as tensor_add[M // 128, N // 512]."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    row0 = nl.program_id(0) * 128
    col0 = nl.program_id(1) * 512
    i_p = row0 + nl.arange(128)[:, None]
    i_f = col0 + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[i_p, i_f])
    b_tile = nl.load(b_input[i_p, i_f])
    nl.store(c_output[i_p, i_f], value=a_tile + b_tile)
    return c_output


@nki.jit
def tensor_add_into(a_input, b_input, c_output):
    """Older style: the output tensor is passed in and written, nothing is returned."""
    rows, cols = a_input.shape
    for r in nl.affine_range(rows // 128):
        a_tile = nl.load(a_input[r * 128 : (r + 1) * 128, 0:cols])
        b_tile = nl.load(b_input[r * 128 : (r + 1) * 128, 0:cols])
        nl.store(c_output[r * 128 : (r + 1) * 128, 0:cols], value=nl.add(a_tile, b_tile))


@nki.jit
def matmul_tiled(lhsT, rhs):
    """result[M, N] = lhsT.T @ rhs, PSUM accumulation over K tiles with nl.matmul."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    tm = nl.tile_size.gemm_stationary_fmax
    tk = nl.tile_size.pmax
    tn = nl.tile_size.gemm_moving_fmax
    for m in nl.affine_range(M // tm):
        for n in nl.affine_range(N // tn):
            acc = nl.zeros((tm, tn), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // tk):
                lhsT_tile = nl.ndarray((tk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((tk, tn), dtype=rhs.dtype, buffer=nl.sbuf)
                lhsT_tile[...] = nl.load(lhsT[k * tk : (k + 1) * tk, m * tm : (m + 1) * tm])
                rhs_tile[...] = nl.load(rhs[k * tk : (k + 1) * tk, n * tn : (n + 1) * tn])
                acc += nl.matmul(lhsT_tile[...], rhs_tile[...], transpose_x=True)
            out_tile = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * tm : (m + 1) * tm, n * tn : (n + 1) * tn], value=out_tile)
    return result


@nki.jit
def matmul_isa(lhsT, rhs):
    """Same product with nisa.nc_matmul, block dims via nl.par_dim and psum[...] +=."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    kt = K // 128
    for m in nl.affine_range(M // 128):
        lhsT_tiles = nl.ndarray((kt, nl.par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(kt):
            lhsT_tiles[k] = nl.load(lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(kt):
                rhs_tile = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                acc[...] += nisa.nc_matmul(lhsT_tiles[k], rhs_tile)
            nl.store(result[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], value=acc)
    return result


@nki.jit
def matmul_plain(x, y):
    """x @ y for a single tile without pre-transposing x (the emulator inserts the transpose)."""
    out = nl.ndarray((x.shape[0], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    x_tile = nl.load(x)
    y_tile = nl.load(y)
    nl.store(out, value=nl.copy(nl.matmul(x_tile, y_tile)))
    return out


@nki.jit
def transpose_tile(x):
    """TensorE transpose of one tile (both sides <= 128)."""
    rows, cols = x.shape
    out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    flipped = nisa.nc_transpose(tile)
    nl.store(out, value=nl.copy(flipped))
    return out


@nki.jit
def softmax_rows(x):
    """Row softmax; ragged last tile guarded by masks on load and store only."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range((rows + 127) // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f], mask=(i_p < rows))
        row_max = nl.max(tile, axis=1)
        shifted = nl.subtract(tile, row_max)
        expo = nl.exp(shifted)
        total = nl.sum(expo, axis=1)
        nl.store(out[i_p, i_f], value=nl.divide(expo, total), mask=(i_p < rows))
    return out


@nki.jit
def rmsnorm(a, g):
    """a / sqrt(mean(a^2) + eps) * g, row tiles of 128 with a ragged-tail mask."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_one = nl.arange(1)[:, None]
    i_f = nl.arange(cols)[None, :]
    g_tile = nl.load(g.reshape((1, cols))[i_one, i_f])
    for t in nl.affine_range((rows + 127) // 128):
        r = t * 128 + i_p
        a_tile = nl.load(a[r, i_f], mask=(r < rows))
        sq_sum = nl.sum(nl.square(a_tile), axis=[1])
        inv_rms = nl.rsqrt(sq_sum / cols + 1e-6)
        scaled = nl.multiply(a_tile, inv_rms)
        result = nl.multiply(scaled, g_tile.broadcast_to((128, cols)), mask=(r < rows))
        nl.store(out[r, i_f], value=result, mask=(r < rows))
    return out


@nki.jit
def layernorm_mean(x, gamma, beta, eps=1e-5):
    """LayerNorm with nl.mean; gamma/beta shaped (1, D)."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    g_tile = nl.load(gamma)
    b_tile = nl.load(beta)
    for t in nl.affine_range(rows // 128):
        tile = nl.load(x[t * 128 : (t + 1) * 128, :])
        mu = nl.mean(tile, axis=1)
        centred = nl.subtract(tile, mu)
        var = nl.mean(nl.square(centred), axis=1)
        normed = nl.multiply(centred, nl.rsqrt(var + eps))
        y = normed * g_tile.broadcast_to((128, cols)) + b_tile.broadcast_to((128, cols))
        nl.store(out[t * 128 : (t + 1) * 128, :], value=y)
    return out


@nki.jit
def layernorm_bn(x, gamma, beta, eps=1e-5):
    """LayerNorm with nisa.bn_stats/bn_aggr and nisa.tensor_scalar (D <= 512)."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    g_tile = nl.load(gamma)
    b_tile = nl.load(beta)
    for t in nl.affine_range(rows // 128):
        tile = nl.load(x[t * 128 : (t + 1) * 128, :])
        stats = nisa.bn_stats(tile)
        mean_var = nisa.bn_aggr(stats)
        mean = mean_var[:, 0:1]
        rstd = nl.rsqrt(mean_var[:, 1:2] + eps)
        normed = nisa.tensor_scalar(tile, np.subtract, mean, op1=np.multiply, operand1=rstd)
        y = nisa.tensor_tensor(normed, g_tile.broadcast_to((128, cols)), op=nl.multiply)
        y = nisa.tensor_tensor(y, b_tile.broadcast_to((128, cols)), op=nl.add)
        nl.store(out[t * 128 : (t + 1) * 128, :], value=y)
    return out


@nki.jit
def exp_activation(x, bias_col):
    """nisa.activation with a (P, 1) bias and scalar scale, plus a sum reduction."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    sums = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(x)
    bias = nl.load(bias_col)
    acc = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    y = nisa.activation_reduce(
        op=nl.exp, data=tile, reduce_op=nl.add, reduce_res=acc, bias=bias, scale=0.5
    )
    nl.store(out, value=y)
    nl.store(sums, value=acc)
    return out, sums


@nki.jit
def causal_mask(x):
    """Lower-triangular mask with nisa.iota and nisa.affine_select."""
    n = x.shape[0]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(n)[:, None]
    i_f = nl.arange(n)[None, :]
    tile = nl.load(x)
    masked = nisa.affine_select(i_p >= i_f, tile, -9984.0)
    idx = nisa.iota(i_p * n + i_f, dtype=nl.float32)
    nl.store(out, value=nl.add(masked, nl.multiply(idx, 0.0)))
    return out
