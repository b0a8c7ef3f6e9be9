"""Hand-written NKI for corpus/softmax_warp.cu (row softmax, C <= 1024), to compare.

The row a warp caches in registers is a partition row in SBUF; up to 8 row tiles are loaded
first so the loads stream back to back while earlier tiles compute and store. The
__shfl_xor_sync max is one VectorE max (negated in place), exp(x - max) and its sum one ScalarE
activation with a fused add-reduce, and the output the exponentials times 1 / sum.
softmax_warp(x) -> out
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
GROUP_MAX = 8  # row tiles resident at once: 8 * C * 4 B <= 32 KiB per partition


@nki.jit
def softmax_warp(x):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    n_rt = (R + P_TILE - 1) // P_TILE
    group = min(GROUP_MAX, n_rt)
    i_q = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(C)[None, :]  # c = lane + 32 * i, the whole row at once
    for g in nl.affine_range((n_rt + group - 1) // group):
        vals = nl.ndarray((group, nl.par_dim(P_TILE), C), dtype=x.dtype, buffer=nl.sbuf)
        for j in nl.affine_range(group):
            i_p = (g * group + j) * P_TILE + i_q  # row = blockIdx.x * 4 + warp
            # vals[i] = c < cols ? x[c] : -FLT_MAX (rows past the end are masked off)
            vals[j] = nl.load(x[i_p, i_f], mask=i_p < R)
        for j in nl.affine_range(group):
            i_p = (g * group + j) * P_TILE + i_q
            ok = i_p < R  # the warp-uniform exit for row >= rows
            # m = warp_max(fmaxf over vals), negated in the same VectorE instruction
            neg_max = nisa.tensor_reduce(nl.max, vals[j], axis=1, negate=True, mask=ok)
            # vals[i] = expf(vals[i] - m); s += vals[i]; s = warp_sum(s)
            s = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
            exps = nisa.activation_reduce(
                op=nl.exp, data=vals[j], bias=neg_max, reduce_op=nl.add, reduce_res=s, mask=ok
            )
            inv = nl.reciprocal(s, mask=ok)  # const float inv = 1.0f / s
            y = nisa.tensor_scalar(exps, op0=nl.multiply, operand0=inv, mask=ok)  # vals[i] * inv
            nl.store(out[i_p, i_f], value=y, mask=ok)  # if (c < cols) y[c] = ...
    return out
