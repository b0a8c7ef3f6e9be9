"""Hand-written NKI for corpus/log_softmax.cu (row log-softmax), for comparison.

Written for cuda2nki in the style of the optimised NKI softmax tutorial: the row max is one
Vector-engine reduction, exp(x - max) and its row sum come from one ScalarE instruction
(activation with a bias of -max and a fused add-reduce, the exponentials themselves discarded),
and the output is one tensor_scalar: x - max - log(sum) as a subtract of a (P, 1) offset.
log_softmax(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def log_softmax(x):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(C)[None, :]
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        ok = i_p < R
        x_tile = nl.load(x[i_p, i_f], mask=ok)
        row_max = nl.max(x_tile, axis=1)
        neg_max = nl.multiply(row_max, -1.0)
        row_sum = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(
            op=nl.exp, data=x_tile, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum
        )
        offset = nl.add(row_max, nl.log(row_sum))
        y = nisa.tensor_scalar(x_tile, op0=nl.subtract, operand0=offset)
        nl.store(out[i_p, i_f], value=y, mask=ok)
    return out
