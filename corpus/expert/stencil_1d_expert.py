"""Hand-written NKI for corpus/stencil_1d.cu (7-point stencil, zero outside [0, n)), to compare.

The vector is spread over all 128 partitions, F contiguous elements each; every partition row
is loaded with its 3-cell halo on both sides (overlapping windows of one DMA, F + 6 contiguous
floats per row), so the CUDA shared tile with halos becomes one SBUF tile and no data crosses
partitions. Cells outside [0, n) are masked off the load into a zeroed tile. The taps are a
chain of VectorE scalar-tensor-tensor ops (w[j] * shifted view + acc), one instruction per
tap, in the CUDA order. stencil_1d(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 512  # elements per partition per tile (2 KiB rows)
RADIUS = 3
# __constant__ float c_weights[2 * RADIUS + 1] (literals of stencil_1d.cu, rounded to fp32 on use)
C_WEIGHTS = (0.02, -0.05, 0.15, 0.5, 0.25, 0.1, 0.03)


@nki.jit
def stencil_1d(x):
    N = x.shape[0]
    out = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tiles, <= F_MAX
    i_p = nl.arange(P_TILE)[:, None]
    i_h = nl.arange(F + 2 * RADIUS)[None, :]
    i_f = nl.arange(F)[None, :]
    for t in nl.affine_range(n_tiles):
        base = t * (P_TILE * F) + i_p * F
        # the shared tile s[BLOCK_SIZE + 2 * RADIUS]: in[gidx - RADIUS .. gidx + RADIUS], 0 outside
        src = base + i_h - RADIUS
        s = nl.zeros((P_TILE, F + 2 * RADIUS), dtype=nl.float32, buffer=nl.sbuf)
        s[...] = nl.load(x[src], mask=(src >= 0) & (src < N))
        # `acc += c_weights[k + RADIUS] * s[lidx + k]` for k = -RADIUS..RADIUS
        acc = nl.multiply(s[:, 0:F], C_WEIGHTS[0])
        for j in nl.static_range(1, 2 * RADIUS + 1):
            acc = nisa.scalar_tensor_tensor(
                data=s[:, j : j + F],
                op0=nl.multiply,
                operand0=C_WEIGHTS[j],
                op1=nl.add,
                operand1=acc,
            )
        idx = base + i_f
        nl.store(out[idx], value=acc, mask=idx < N)  # the CUDA `if (gidx >= n) return`
    return out
