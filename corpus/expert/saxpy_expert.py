"""Hand-written NKI for corpus/saxpy.cu (y = a * x + y, y updated in place), to compare.

The grid-stride loop over a capped grid is just a flat element range here: tiles of 128
partitions x F contiguous elements (F <= 512 fp32, 2 KiB per partition row, balanced so every
tile is nearly full) with a mask for the ragged end. Tiles go in groups of up to 8 whose loads
are issued first, so stores overlap the remaining loads; `a * x + y` is one VectorE
scalar_tensor_tensor per tile. The updated y is returned as a new HBM tensor (the inout
convention). saxpy(x, y, *, a) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 512  # fp32 elements per partition row: 2 KiB DMA rows
GROUP = 8  # tiles whose loads are issued together


@nki.jit
def saxpy(x, y, *, a):
    N = x.shape[0]
    y_out = nl.ndarray((N,), dtype=y.dtype, buffer=nl.shared_hbm)
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tile width
    group = min(GROUP, n_tiles)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    for g in nl.affine_range((n_tiles + group - 1) // group):
        x_t = nl.ndarray((group, nl.par_dim(P_TILE), F), dtype=x.dtype, buffer=nl.sbuf)
        y_t = nl.ndarray((group, nl.par_dim(P_TILE), F), dtype=y.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(group):
            idx = ((g * group + k) * P_TILE + i_p) * F + i_f
            ok = idx < N  # the grid-stride loop's bound `i < n`
            x_t[k] = nl.load(x[idx], mask=ok)
            y_t[k] = nl.load(y[idx], mask=ok)
        for k in nl.affine_range(group):
            idx = ((g * group + k) * P_TILE + i_p) * F + i_f
            ok = idx < N
            # y[i] = a * x[i] + y[i]: (x * a) + y in one VectorE instruction
            res = nisa.scalar_tensor_tensor(
                data=x_t[k], op0=nl.multiply, operand0=a, op1=nl.add, operand1=y_t[k]
            )
            nl.store(y_out[idx], value=res, mask=ok)
    return y_out
