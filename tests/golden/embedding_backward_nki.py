"""Scatter-add of rows: dwte[i, j] = dwte[i, j] + (sum_{k < B * T} ((tokens[(k // T), (k % T)] == i ? dout[(k // T), (k % T), j] : 0))); dwpe[i, j] = (sum_{k < B} dout[k, i, j]) + dwpe[i, j]

Migrated by cuda2nki from embedding_backward.cu (kernel `embedding_bwd_kernel`, family scatter, lifted).
Calling convention (cuda2nki task contract 1.0):
    embedding_bwd(dout, tokens, dwte, dwpe) -> dwte, dwpe
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="embedding_bwd_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # rows per tile (partitions)
MAX_COLS = 8192  # longest row kept whole on a partition


@nki.jit
def embedding_bwd(dout, tokens, dwte, dwpe):
    B = dout.shape[0]
    T = dout.shape[1]
    C = dout.shape[2]
    V = dwte.shape[0]

    assert C <= MAX_COLS, "longer rows need column tiles"
    dwte_out = nl.ndarray((V, C), dtype=nl.float32, buffer=nl.shared_hbm)
    dwpe_out = nl.ndarray((T, C), dtype=nl.float32, buffer=nl.shared_hbm)

    K = B * T  # rows of dout, each C long
    x_rows = dout.reshape((K, C))
    R0 = V  # rows of dwte_out
    dwte_rows = dwte_out.reshape((R0, C))
    R1 = T  # rows of dwpe_out
    dwpe_rows = dwpe_out.reshape((R1, C))
    i_f = nl.arange(C)[None, :]
    i_q = nl.arange(P_TILE)[:, None]
    # from embedding_backward.cu:13 — each output starts from its old value (zeros where it has none)
    for r in nl.affine_range((R0 + P_TILE - 1) // P_TILE):
        i_r = r * P_TILE + i_q
        old = nl.load(dwte.reshape((R0, C))[i_r, i_f], mask=i_r < R0)
        nl.store(dwte_rows[i_r, i_f], value=old, mask=i_r < R0)
    for r in nl.affine_range((R1 + P_TILE - 1) // P_TILE):
        i_r = r * P_TILE + i_q
        old = nl.load(dwpe.reshape((R1, C))[i_r, i_f], mask=i_r < R1)
        nl.store(dwpe_rows[i_r, i_f], value=old, mask=i_r < R1)
    # (sequential: tiles add into the same rows of HBM, a dependency from tile to tile)
    for t in nl.sequential_range((K + P_TILE - 1) // P_TILE):
        # from embedding_backward.cu:13 — 128 rows of the scattered tensor per tile, one per partition, loaded once for every output
        i_p = t * P_TILE + i_q
        ok = i_p < K
        rows_t = nl.load(x_rows[i_p, i_f], mask=ok)
        # from embedding_backward.cu:13 — lifted: dwte[i, j] = dwte[i, j] + (sum_{k < B * T} ((tokens[(k // T), (k % T)] == i ? dout[(k // T), (k % T), j] : 0)))
        # from embedding_backward.cu:13 — rows added at the row each id names: an atomic read-modify-write DMA, every contribution to a repeated id summed
        ids0 = nl.zeros((P_TILE, 1), dtype=tokens.dtype, buffer=nl.sbuf)  # (past the end: row 0, masked)
        ids0[i_q, 0] = nl.load(tokens.reshape((K,))[i_p], mask=ok)
        nl.atomic_rmw(dwte_rows[ids0[i_q, 0], i_f], value=rows_t, op=nl.add, mask=ok)
        # from embedding_backward.cu:13 — lifted: dwpe[i, j] = (sum_{k < B} dout[k, i, j]) + dwpe[i, j]
        # from embedding_backward.cu:13 — rows added at their position modulo the output's rows (a sum over the leading axis), by the same DMA
        pos1 = nl.mod(nisa.iota(i_p, dtype=nl.int32), R1, dtype=nl.int32)
        nl.atomic_rmw(dwpe_rows[pos1[i_q, 0], i_f], value=rows_t, op=nl.add, mask=ok)
    return dwte_out, dwpe_out
