"""Hand-written NKI for corpus/vector_add.cu (c = a + b over a float32 vector), to compare.

The CUDA kernel's one-thread-per-element grid becomes tiles of 128 partitions x F contiguous
elements of the flat vector (F <= 512 fp32, 2 KiB per partition row, balanced so every tile is
nearly full); the ragged end is the mask. Tiles go in groups of up to 8: the group's loads are
issued first, then one VectorE add and one store per tile, so the stores and adds of a group
overlap its remaining loads instead of waiting behind them. vector_add(a, b) -> c.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 512  # fp32 elements per partition row: 2 KiB DMA rows
GROUP = 8  # tiles whose loads are issued together (2 x 8 x 2 KiB of SBUF per partition)


@nki.jit
def vector_add(a, b):
    N = a.shape[0]
    c = nl.ndarray((N,), dtype=a.dtype, buffer=nl.shared_hbm)
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tile width
    group = min(GROUP, n_tiles)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    for g in nl.affine_range((n_tiles + group - 1) // group):
        a_t = nl.ndarray((group, nl.par_dim(P_TILE), F), dtype=a.dtype, buffer=nl.sbuf)
        b_t = nl.ndarray((group, nl.par_dim(P_TILE), F), dtype=b.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(group):
            idx = ((g * group + k) * P_TILE + i_p) * F + i_f
            ok = idx < N  # the CUDA guard `i < n`
            a_t[k] = nl.load(a[idx], mask=ok)
            b_t[k] = nl.load(b[idx], mask=ok)
        for k in nl.affine_range(group):
            idx = ((g * group + k) * P_TILE + i_p) * F + i_f
            ok = idx < N
            nl.store(c[idx], value=nl.add(a_t[k], b_t[k]), mask=ok)  # c[i] = a[i] + b[i]
    return c
