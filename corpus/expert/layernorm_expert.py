"""Hand-written NKI for corpus/layernorm.cu (row layernorm with gamma, beta, eps), to compare.

Written for cuda2nki in the style of the optimised NKI layernorm tutorial: mean and variance
from the Vector engine's bn_stats/bn_aggr (one pass, in chunks of at most 512 elements), then
normalisation as one tensor_scalar (subtract mean, multiply by rstd) and the affine transform.
layernorm(x, gamma, beta, *, eps) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
BN_FMAX = 512


@nki.jit
def layernorm(x, gamma, beta, *, eps):
    R, C = x.shape
    y = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(C)[None, :]
    g_row = nl.load(gamma[i_f])
    b_row = nl.load(beta[i_f])
    n_chunks = (C + BN_FMAX - 1) // BN_FMAX
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        ok = i_p < R
        x_tile = nl.load(x[i_p, i_f], mask=ok)
        stats = nl.ndarray((P_TILE, 6 * n_chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.static_range(n_chunks):
            width = min(BN_FMAX, C - c * BN_FMAX)
            stats[:, 6 * c : 6 * c + 6] = nisa.bn_stats(
                x_tile[:, c * BN_FMAX : c * BN_FMAX + width]
            )
        mean_var = nisa.bn_aggr(stats)
        mean = mean_var[:, 0:1]
        rstd = nl.rsqrt(nl.add(mean_var[:, 1:2], eps))
        norm = nisa.tensor_scalar(
            x_tile, op0=nl.subtract, operand0=mean, op1=nl.multiply, operand1=rstd
        )
        nl.store(y[i_p, i_f], value=nl.add(nl.multiply(norm, g_row), b_row), mask=ok)
    return y
