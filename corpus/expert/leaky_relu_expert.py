"""Hand-written NKI for corpus/leaky_relu.cu (leaky ReLU, leaky_relu_kernel<float>), to compare.

Tiles of 128 partitions x F contiguous elements of the flat vector (F <= 512 fp32, 2 KiB per
partition row, balanced so every tile is nearly full) with a mask for the ragged end; each
tile's buffers are allocated in the loop body so the next tile's load overlaps this tile's
compute. The select `v > 0 ? v : v * slope` stays a select on VectorE (compare, scale, where)
rather than max(v, slope * v): that keeps NaN -> NaN and holds for any runtime slope.
leaky_relu(x, *, negative_slope) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 512  # fp32 elements per partition row: 2 KiB DMA rows


@nki.jit
def leaky_relu(x, *, negative_slope):
    N = x.shape[0]
    y = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tile width
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    for t in nl.affine_range(n_tiles):
        idx = (t * P_TILE + i_p) * F + i_f
        ok = idx < N  # the CUDA guard `i < n`
        v = nl.load(x[idx], mask=ok)
        # v > 0.0f ? v : v * negative_slope, computed in fp32
        res = nl.where(nl.greater(v, 0.0), v, nl.multiply(v, negative_slope))
        nl.store(y[idx], value=res, mask=ok)
    return y
