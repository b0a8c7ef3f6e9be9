"""Hand-written NKI for corpus/rmsnorm.cu (RMS normalisation with a weight vector), to compare.

Written for cuda2nki in the style of the optimised NKI RMSNorm tutorial: the sum of squares of a
row tile comes from one ScalarE instruction (activation `square` with a fused add-reduce), the
inverse RMS is one (P, 1) rsqrt, and the normalisation is a tensor_scalar multiply by the
per-row factor followed by the broadcast weight. rmsnorm(x, weight, *, eps) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def rmsnorm(x, weight, *, eps):
    R, C = x.shape
    y = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(C)[None, :]
    w_row = nl.load(weight[i_f])
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        ok = i_p < R
        x_tile = nl.load(x[i_p, i_f], mask=ok)
        sum_sq = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(op=nl.square, data=x_tile, reduce_op=nl.add, reduce_res=sum_sq)
        inv_rms = nl.rsqrt(nl.add(nl.multiply(sum_sq, 1.0 / C), eps))
        norm = nisa.tensor_scalar(x_tile, op0=nl.multiply, operand0=inv_rms)
        nl.store(y[i_p, i_f], value=nl.multiply(norm, w_row), mask=ok)
    return y
