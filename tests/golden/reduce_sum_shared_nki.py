"""Reduction (block_partial): sum of each group along the free axis

Migrated by cuda2nki from reduce_sum_shared.cu (kernel `reduce_sum_shared_kernel`, family reduction, block_partial).
Calling convention (cuda2nki task contract 1.0):
    reduce_sum_shared(x) -> partial
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="reduce_sum_shared_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


P_TILE = 128  # reduced groups per tile, one per partition
CHUNK = 512  # elements one CUDA block reduces (its partial sum)


@nki.jit
def reduce_sum_shared(x):
    N = x.shape[0]

    groups = (N + 512 - 1) // 512
    partial = nl.ndarray(((N + 512 - 1) // 512,), dtype=nl.float32, buffer=nl.shared_hbm)

    i_f = nl.arange(CHUNK)[None, :]
    for g in nl.affine_range((groups + P_TILE - 1) // P_TILE):
        i_p = g * P_TILE + nl.arange(P_TILE)[:, None]
        idx = i_p * CHUNK + i_f
        tile = nl.zeros((P_TILE, CHUNK), dtype=nl.float32, buffer=nl.sbuf)
        tile[...] = nl.load(x[idx], mask=idx < N)
        # from reduce_sum_shared.cu:25 — shared_tree sum reduction becomes one nl.sum along the free axis
        part = nl.sum(tile, axis=1)
        nl.store(partial[i_p], value=part, mask=i_p < groups)
    return partial
