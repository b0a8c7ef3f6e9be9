"""Hand-written NKI for corpus/stencil_2d_5pt.cu (one 5-point Jacobi step), to compare.

Interior rows go on the partitions (128 per tile) with whole rows on the free axis, so every
DMA moves full contiguous rows; the north and south neighbours are the same rows loaded one
row up and one row down (two more row-contiguous DMAs) instead of a cross-partition shift, and
west/east are free-axis views of the centre tile. Five VectorE ops give
`c + alpha * ((n + s + w + e) - 4c)` in the CUDA order; the boundary columns are copied into
the same output rows, and the first and last rows are copied by one 2-row load and store.
jacobi_5pt(x, *, alpha) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def jacobi_5pt(x, *, alpha):
    H, W = x.shape
    out = nl.ndarray((H, W), dtype=x.dtype, buffer=nl.shared_hbm)
    i_w = nl.arange(W)[None, :]
    if H < 3 or W < 3:
        # no interior: every cell is on the boundary, `out[idx] = c`
        for t in nl.affine_range((H + P_TILE - 1) // P_TILE):
            i_r = t * P_TILE + nl.arange(P_TILE)[:, None]
            nl.store(out[i_r, i_w], value=nl.load(x[i_r, i_w], mask=i_r < H), mask=i_r < H)
        return out
    # rows 0 and H-1 (the `y == 0 || y == H - 1` boundary): copied unchanged
    i_b = nl.arange(2)[:, None] * (H - 1)
    nl.store(out[i_b, i_w], value=nl.load(x[i_b, i_w]))
    Wi = W - 2  # interior columns 1..W-2
    for t in nl.affine_range((H - 2 + P_TILE - 1) // P_TILE):
        i_r = 1 + t * P_TILE + nl.arange(P_TILE)[:, None]  # interior rows 1..H-2
        ok = i_r < H - 1
        c = nl.load(x[i_r, i_w], mask=ok)
        north = nl.load(x[i_r - 1, 1 + nl.arange(Wi)[None, :]], mask=ok)
        south = nl.load(x[i_r + 1, 1 + nl.arange(Wi)[None, :]], mask=ok)
        # `(north + south + west + east) - 4.0f * c`, then `c + alpha * (...)`
        s4 = nl.add(nl.add(nl.add(north, south), c[:, 0:Wi]), c[:, 2:W])
        lap = nisa.scalar_tensor_tensor(
            data=c[:, 1 : W - 1], op0=nl.multiply, operand0=-4.0, op1=nl.add, operand1=s4
        )
        res = nl.ndarray((P_TILE, W), dtype=x.dtype, buffer=nl.sbuf)
        res[:, 1 : W - 1] = nisa.scalar_tensor_tensor(
            data=lap, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=c[:, 1 : W - 1]
        )
        # the `x == 0 || x == W - 1` boundary columns: copied
        res[:, 0:1] = nl.copy(c[:, 0:1])
        res[:, W - 1 : W] = nl.copy(c[:, W - 1 : W])
        nl.store(out[i_r, i_w], value=res, mask=ok)
    return out
