"""Hand-written NKI for corpus/conv1d.cu (K-tap "same" cross-correlation, w a tensor), to compare.

The signal is spread over all 128 partitions, F contiguous elements each; every partition row
is loaded with its K/2-cell halo on both sides (overlapping windows of one DMA, F + K - 1
contiguous floats per row), so the CUDA shared tile s_x becomes one SBUF tile and nothing
crosses partitions; cells outside [0, n) are masked off the load into a zeroed tile. The K
weights (s_w) are loaded once and broadcast to every partition as per-partition scalars, and
the taps are a chain of VectorE scalar-tensor-tensor ops (w[k] * shifted view + acc) in the
CUDA order. conv1d_same(x, w) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 512  # elements per partition per tile (2 KiB rows)


@nki.jit
def conv1d_same(x, w):
    N = x.shape[0]
    K = w.shape[0]  # the template parameter K
    PAD = K // 2
    y = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tiles, <= F_MAX
    # s_w[K]: one [1, K] load, broadcast to the partitions as per-partition scalars
    w_row = nl.load(w[nl.arange(K)[None, :]])
    w_all = nl.copy(nl.broadcast_to(w_row, (P_TILE, K)))
    i_p = nl.arange(P_TILE)[:, None]
    i_h = nl.arange(F + K - 1)[None, :]
    i_f = nl.arange(F)[None, :]
    for t in nl.affine_range(n_tiles):
        base = t * (P_TILE * F) + i_p * F
        # s_x[BLOCK_SIZE + K - 1] = x[base + t - PAD], 0 outside [0, n)
        src = base + i_h - PAD
        s = nl.zeros((P_TILE, F + K - 1), dtype=nl.float32, buffer=nl.sbuf)
        s[...] = nl.load(x[src], mask=(src >= 0) & (src < N))
        # `acc += s_w[k] * s_x[threadIdx.x + k]` for k = 0..K-1
        acc = nisa.tensor_scalar(s[:, 0:F], op0=nl.multiply, operand0=w_all[:, 0:1])
        for k in nl.static_range(1, K):
            acc = nisa.scalar_tensor_tensor(
                data=s[:, k : k + F],
                op0=nl.multiply,
                operand0=w_all[:, k : k + 1],
                op1=nl.add,
                operand1=acc,
            )
        idx = base + i_f
        nl.store(y[idx], value=acc, mask=idx < N)  # the CUDA guard `i < n`
    return y
