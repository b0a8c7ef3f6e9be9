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

MAX_PARTS = 2048  # block results one partition keeps in SBUF before they are stored (8 KiB)


@nki.jit
def reduce_sum_shared(x):
    N = x.shape[0]

    groups = (N + 512 - 1) // 512
    partial = nl.ndarray(((N + 512 - 1) // 512,), dtype=nl.float32, buffer=nl.shared_hbm)

    # partition q reduces the consecutive CUDA blocks q * per_p ... (per_p of them), so each
    # partition's results are contiguous and go out in one DMA per column chunk
    per_p = (groups + P_TILE - 1) // P_TILE  # CUDA blocks per partition
    n_parts = min(per_p, MAX_PARTS)  # results kept per partition before they are stored
    per_p = (per_p + n_parts - 1) // n_parts * n_parts  # whole chunks of n_parts
    i_q = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(CHUNK)[None, :]
    i_1 = nl.arange(1)[None, :]
    for chunk in nl.affine_range(per_p // n_parts):
        parts = nl.ndarray((P_TILE, n_parts), dtype=nl.float32, buffer=nl.sbuf)
        for g in nl.affine_range(n_parts):
            i_b = i_q * per_p + chunk * n_parts + g  # blockIdx.x
            idx = i_b * CHUNK + i_f
            tile = nl.zeros((P_TILE, CHUNK), dtype=nl.float32, buffer=nl.sbuf)
            tile[...] = nl.load(x[idx], mask=idx < N)
            # from reduce_sum_shared.cu:25 — shared_tree sum reduction becomes one nl.sum along the free axis
            part = nl.sum(tile, axis=1)
            parts[i_q, g + i_1] = part
        i_b = i_q * per_p + chunk * n_parts + nl.arange(n_parts)[None, :]
        nl.store(partial[i_b], value=parts, mask=i_b < groups)
    return partial
