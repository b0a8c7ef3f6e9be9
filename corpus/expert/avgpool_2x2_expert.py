"""Hand-written NKI for corpus/avgpool_2x2.cu (2x2 mean pooling, stride 2, float), to compare.

Output rows go on the partitions: input rows 2oy and 2oy+1 are adjacent in memory, so each
partition's pair of rows is one contiguous DMA (2W floats). The four window taps are strided
free-axis views of that tile; VectorE adds them in the CUDA order and ScalarE applies the 0.25
scale (exact, a power of two). An odd last row or column is never read into a window, as with
the CUDA floor division. avgpool_2x2(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def avgpool_2x2(x):
    H, W = x.shape
    Ho, Wo = H // 2, W // 2
    out = nl.ndarray((Ho, Wo), dtype=x.dtype, buffer=nl.shared_hbm)
    i_r = nl.arange(2)[None, :, None]
    i_w = nl.arange(W)[None, None, :]
    i_o = nl.arange(Wo)[None, :]
    for t in nl.affine_range((Ho + P_TILE - 1) // P_TILE):
        i_p = t * P_TILE + nl.arange(P_TILE)[:, None, None]
        # row0 = in + 2oy * W, row1 = row0 + W: one [128, 2, W] tile, 2W contiguous per row pair
        rows = nl.load(x[2 * i_p + i_r, i_w], mask=i_p < Ho)
        # `row0[0] + row0[1] + row1[0] + row1[1]`, in float
        s = nl.add(
            nl.add(
                nl.add(rows[:, 0, 0 : 2 * Wo : 2], rows[:, 0, 1 : 2 * Wo : 2]),
                rows[:, 1, 0 : 2 * Wo : 2],
            ),
            rows[:, 1, 1 : 2 * Wo : 2],
        )
        avg = nisa.activation(op=nl.copy, data=s, scale=0.25)  # `0.25f * s` on ScalarE
        i_q = t * P_TILE + nl.arange(P_TILE)[:, None]
        nl.store(out[i_q, i_o], value=avg, mask=i_q < Ho)  # the guard `oy >= Ho`
    return out
