"""Hand-written NKI for corpus/gemv.cu (y = A @ x), for comparison.

GEMV is memory-bound, so it stays on the Vector engine rather than the Tensor engine: 128 rows
of A per tile (one per partition) stream through SBUF in K chunks; the matching chunk of x is
loaded once per chunk as a [1, KC] row and broadcast across the partitions; a fused
multiply + free-axis sum gives each row's partial dot product, accumulated in fp32.
Same calling contract as the generated kernel: gemv(A, x) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128  # rows per tile, one per partition
KC = 2048  # K elements per chunk (free size)


@nki.jit
def gemv(A, x):
    M, K = A.shape
    y = nl.ndarray((M,), dtype=A.dtype, buffer=nl.shared_hbm)
    kc = min(K, KC)  # no padding work when K is short
    n_kc = (K + kc - 1) // kc
    for r in nl.affine_range((M + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        rows_ok = i_p < M
        acc = nl.zeros((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.sequential_range(n_kc):
            i_f = c * kc + nl.arange(kc)[None, :]
            # ragged last chunk: masked loads into zeroed tiles contribute nothing
            x_row = nl.zeros((1, kc), dtype=x.dtype, buffer=nl.sbuf)
            x_row[...] = nl.load(x[i_f], mask=i_f < K)
            a_tile = nl.zeros((P_TILE, kc), dtype=A.dtype, buffer=nl.sbuf)
            a_tile[...] = nl.load(A[i_p, i_f], mask=rows_ok & (i_f < K))
            # x broadcast over the 128 row partitions, then one free-axis sum per row
            prod = nl.multiply(a_tile, nl.broadcast_to(x_row, (P_TILE, kc)))
            acc[...] = nl.add(acc, nl.sum(prod, axis=1))
        nl.store(y[i_p], value=acc, mask=rows_ok)
    return y
