"""Hand-written NKI for corpus/conv2d_3x3.cu (zero-padded 3x3 cross-correlation), to compare.

Image rows go on the partitions (128 per tile), whole rows on the free axis. The three input
rows each output row needs are three row-contiguous DMAs of the same image shifted by one row
(instead of a cross-partition shift), each into a zeroed [128, W + 2] tile whose first and
last columns are the zero halo; rows outside the image are masked off the loads. The nine taps
(constant weights, as c_w) are a chain of VectorE scalar-tensor-tensor ops on shifted
free-axis views, in the CUDA tap order. conv2d_3x3(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
# __constant__ float c_w[3][3] (literals of conv2d_3x3.cu, rounded to fp32 on use)
C_W = ((0.0625, 0.125, 0.0625), (0.125, 0.25, 0.125), (0.0625, -0.125, 0.0625))


@nki.jit
def conv2d_3x3(x):
    H, W = x.shape
    out = nl.ndarray((H, W), dtype=x.dtype, buffer=nl.shared_hbm)
    i_w = nl.arange(W)[None, :]
    for t in nl.affine_range((H + P_TILE - 1) // P_TILE):
        i_y = t * P_TILE + nl.arange(P_TILE)[:, None]
        # rows y-1, y, y+1 with a one-pixel zero halo: the shared tile s[TILE + 2R][TILE + 2R]
        taps = []
        for ky in nl.static_range(3):
            gy = i_y + ky - 1
            s = nl.zeros((P_TILE, W + 2), dtype=nl.float32, buffer=nl.sbuf)
            s[:, 1 : W + 1] = nl.load(x[gy, i_w], mask=(gy >= 0) & (gy < H))
            taps.append(s)
        # `acc += c_w[ky + R][kx + R] * s[ty + R + ky][tx + R + kx]`, ky outer, kx inner
        acc = nl.multiply(taps[0][:, 0:W], C_W[0][0])
        for ky in nl.static_range(3):
            for kx in nl.static_range(3):
                if ky + kx > 0:
                    acc = nisa.scalar_tensor_tensor(
                        data=taps[ky][:, kx : kx + W],
                        op0=nl.multiply,
                        operand0=C_W[ky][kx],
                        op1=nl.add,
                        operand1=acc,
                    )
        nl.store(out[i_y, i_w], value=acc, mask=i_y < H)  # the guard `y < H && x < W`
    return out
