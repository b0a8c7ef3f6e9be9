"""Hand-written NKI for corpus/embedding_backward.cu (embedding backward), to compare.

The token table's gradient: every row of dout goes to the row its token names, and tokens
repeat, so the rows are added by the DMA engines' atomic read-modify-write into HBM (one id per
partition, repeated ids summed), 128 rows of dout per DMA, after the old gradient is copied to
the output. The position table's gradient is a plain sum over the batch: per tile of 128
positions, the B rows of dout at those positions are added in SBUF on VectorE and stored once,
with no atomics.
embedding_bwd(dout, tokens, dwte, dwpe) -> dwte, dwpe
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def embedding_bwd(dout, tokens, dwte, dwpe):
    B, T, C = dout.shape
    V = dwte.shape[0]
    dwte_out = nl.ndarray((V, C), dtype=nl.float32, buffer=nl.shared_hbm)
    dwpe_out = nl.ndarray((T, C), dtype=nl.float32, buffer=nl.shared_hbm)
    K = B * T
    rows = dout.reshape((K, C))
    ids = tokens.reshape((K,))
    i_q = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(C)[None, :]
    for v in nl.affine_range((V + P_TILE - 1) // P_TILE):  # the running gradient first
        i_v = v * P_TILE + i_q
        nl.store(dwte_out[i_v, i_f], value=nl.load(dwte[i_v, i_f], mask=i_v < V), mask=i_v < V)
    for k in nl.sequential_range((K + P_TILE - 1) // P_TILE):  # atomics into the same rows
        i_k = k * P_TILE + i_q
        ok = i_k < K
        g = nl.load(rows[i_k, i_f], mask=ok)
        tok = nl.zeros((P_TILE, 1), dtype=tokens.dtype, buffer=nl.sbuf)
        tok[i_q, 0] = nl.load(ids[i_k], mask=ok)
        nl.atomic_rmw(dwte_out[tok[i_q, 0], i_f], value=g, op=nl.add, mask=ok)
    for t in nl.affine_range((T + P_TILE - 1) // P_TILE):  # positions: sums over the batch
        i_t = t * P_TILE + i_q
        ok = i_t < T
        acc = nl.load(dwpe[i_t, i_f], mask=ok)
        for b in nl.sequential_range(B):
            acc = nl.add(acc, nl.load(dout[b, i_t, i_f], mask=ok), mask=ok)
        nl.store(dwpe_out[i_t, i_f], value=acc, mask=ok)
    return dwte_out, dwpe_out
