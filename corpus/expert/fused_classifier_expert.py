"""Hand-written NKI for corpus/fused_classifier.cu (softmax cross-entropy forward and backward in
one pass), to compare.

One block per row becomes one partition per row (row r = p * T + t, so targets, dlosses and
losses move in one DMA each). Per tile: VectorE max (negated); one ScalarE pass makes
e = exp(z - max) and its row sum together; the probabilities e / sum and their difference from
the one-hot label (iota == label) take two VectorE instructions, the upstream gradient a third;
z[label] is the one-hot row times z, summed on ScalarE. The loss, log(sum) + max - z[label],
runs once on [128, T]. fused_classifier(logits, dlosses, targets) -> (dlogits, losses)
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def fused_classifier(logits, dlosses, targets):
    R, V = logits.shape
    dlogits = nl.ndarray((R, V), dtype=logits.dtype, buffer=nl.shared_hbm)
    losses = nl.ndarray((R,), dtype=logits.dtype, buffer=nl.shared_hbm)
    T = (R + P_TILE - 1) // P_TILE  # rows per partition
    i_q = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(V)[None, :]
    i_1 = nl.arange(1)[None, :]
    i_t = nl.arange(T)[None, :]
    valid = i_q * T + i_t < R
    # targets[p * T + t] as exact float32 class indices, T contiguous per partition
    label = nl.load(targets[i_q * T + i_t], dtype=nl.float32, mask=valid)
    g = nl.load(dlosses[i_q * T + i_t], mask=valid)
    cls = nisa.iota(i_f + 0 * i_q, dtype=nl.float32)  # column index c in every partition
    neg_max = nl.ndarray((P_TILE, T), dtype=nl.float32, buffer=nl.sbuf)
    sum_exp = nl.ndarray((P_TILE, T), dtype=nl.float32, buffer=nl.sbuf)
    picked = nl.ndarray((P_TILE, T), dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.affine_range(T):
        i_r = i_q * T + t  # row = blockIdx.x
        ok = i_r < R  # if (row >= rows) return
        z = nl.load(logits[i_r, i_f], mask=ok)
        # the row max (the pairs' merged max), kept negated as the exp bias
        neg_max[i_q, t + i_1] = nisa.tensor_reduce(nl.max, z, axis=1, negate=True, mask=ok)
        # e = exp(z - max) and sum(e) (the merged normaliser) in one ScalarE pass
        e = nisa.activation_reduce(
            op=nl.exp,
            data=z,
            bias=neg_max[i_q, t + i_1],
            reduce_op=nl.add,
            reduce_res=sum_exp[i_q, t + i_1],
            mask=ok,
        )
        inv = nl.reciprocal(sum_exp[i_q, t + i_1], mask=ok)
        # onehot - p = (c == label) - e * inv, then times -dloss: (p - onehot) * dloss
        hot_minus_p = nisa.scalar_tensor_tensor(
            data=e,
            op0=nl.multiply,
            operand0=inv,
            op1=nl.subtract,
            operand1=nisa.tensor_scalar(cls, op0=nl.equal, operand0=label[i_q, t + i_1], mask=ok),
            mask=ok,
        )
        grad = nisa.tensor_scalar(hot_minus_p, op0=nl.multiply, operand0=g[i_q, t + i_1], mask=ok)
        nl.store(dlogits[i_r, i_f], value=grad, mask=ok)
        # z[label]: the one-hot row times z, summed
        hit = nisa.scalar_tensor_tensor(
            data=cls,
            op0=nl.equal,
            operand0=label[i_q, t + i_1],
            op1=nl.multiply,
            operand1=z,
            mask=ok,
        )
        nisa.activation_reduce(
            op=nl.copy, data=hit, reduce_op=nl.add, reduce_res=picked[i_q, t + i_1], mask=ok
        )
    # losses[row] = log(sum) + max - z[label], for every row at once
    lse = nl.subtract(nl.log(sum_exp, mask=valid), neg_max, mask=valid)
    nl.store(losses[i_q * T + i_t], value=nl.subtract(lse, picked, mask=valid), mask=valid)
    return dlogits, losses
