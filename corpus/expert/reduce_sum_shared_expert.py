"""Hand-written NKI for corpus/reduce_sum_shared.cu (per-block partial sums), to compare.

A CUDA block's 512-element chunk (two loads per thread, shared-memory tree) is one partition row:
a 2 KiB contiguous DMA row and one fp32 VectorE free-axis sum. Full chunk b = p * G + g sits in
partition p of tile g, so the loads run back to back and each partition's G sums are adjacent in
`partial` (one store at the end); the ragged last chunk is a [1, n % 512] row.
reduce_sum_shared(x) -> partial
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
CHUNK = 512  # 2 * BLOCK: the elements one CUDA block reduces


@nki.jit
def reduce_sum_shared(x):
    N = x.shape[0]
    n_blocks = (N + CHUNK - 1) // CHUNK  # the CUDA grid
    partial = nl.ndarray((n_blocks,), dtype=x.dtype, buffer=nl.shared_hbm)
    n_full = N // CHUNK  # blocks whose 512 elements are all in range
    rem = N - n_full * CHUNK
    G = (n_full + P_TILE - 1) // P_TILE  # full blocks per partition
    i_q = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(CHUNK)[None, :]
    i_1 = nl.arange(1)[None, :]
    if G > 0:
        sums = nl.ndarray((P_TILE, G), dtype=nl.float32, buffer=nl.sbuf)
        for g in nl.affine_range(G):
            i_b = i_q * G + g  # blockIdx.x
            ok = i_b < n_full
            chunk = nl.load(x[i_b * CHUNK + i_f], mask=ok)  # in[i] and in[i + BLOCK], all tids
            # the shared-memory tree (sdata[tid] += sdata[tid + s]) as one free-axis sum
            sums[i_q, g + i_1] = nl.sum(chunk, axis=1, dtype=nl.float32, mask=ok)
        i_g = nl.arange(G)[None, :]
        # if (tid == 0) partial[blockIdx.x] = sdata[0], for every full block in one DMA
        nl.store(partial[i_q * G + i_g], value=sums, mask=i_q * G + i_g < n_full)
    if rem > 0:
        # last block: the guards i < n and i + BLOCK < n leave zeros, i.e. sum what is left
        i_0 = nl.arange(1)[:, None]
        tail = nl.load(x[n_full * CHUNK + i_0 * CHUNK + nl.arange(rem)[None, :]])
        nl.store(partial[n_full + i_0], value=nl.sum(tail, axis=1, dtype=nl.float32))
    return partial
