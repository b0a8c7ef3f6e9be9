"""Hand-written NKI for corpus/softmax_row.cu (row softmax), for comparison.

Written for cuda2nki in the style of the optimised NKI tutorials: the exponential and the row
sum come from one ScalarE instruction (activation with a bias of -max and a fused add-reduce),
and the normalisation is a single multiply by the reciprocal. softmax_row(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def softmax_row(x):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(C)[None, :]
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        ok = i_p < R
        x_tile = nl.load(x[i_p, i_f], mask=ok)
        neg_max = nl.multiply(nl.max(x_tile, axis=1), -1.0)
        row_sum = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        exps = nisa.activation_reduce(
            op=nl.exp, data=x_tile, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum
        )
        nl.store(out[i_p, i_f], value=nl.multiply(exps, nl.reciprocal(row_sum)), mask=ok)
    return out
