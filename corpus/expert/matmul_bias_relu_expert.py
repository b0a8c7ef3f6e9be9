"""Hand-written NKI for corpus/matmul_bias_relu.cu (C = relu(A @ B + bias[N]), float32), to compare.

Matmul as in the tiled experts: each 128-row block of A is loaded with one DMA, transposed
once per K tile on TensorE and kept as the stationary operand; B's K tiles stream as the
moving operand and PSUM accumulates in fp32. The bias joins the same accumulation group as a
rank-1 matmul (ones[1, M] x bias[1, N]), which is TensorE's partition broadcast, so the
epilogue is a single ReLU on the way out of PSUM; it is a compare + select because
`fmaxf(x, 0)` returns 0 for NaN (a max would propagate it). Shapes are trace-time constants:
ragged tails are exact-size tiles, no masks. matmul_bias_relu(A, B, bias) -> C.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

TILE_M = 128  # rows of C per block (stationary free size)
TILE_K = 128  # contraction rows per matmul (partitions)
TILE_N = 512  # columns of C per PSUM bank (moving free size)


@nki.jit
def matmul_bias_relu(A, B, bias):
    M, K = A.shape
    N = B.shape[1]
    C = nl.ndarray((M, N), dtype=A.dtype, buffer=nl.shared_hbm)
    n_k = (K + TILE_K - 1) // TILE_K
    ones = nl.ones((1, TILE_M), dtype=A.dtype, buffer=nl.sbuf)  # stationary of the bias matmul
    for m in nl.static_range((M + TILE_M - 1) // TILE_M):
        m0 = m * TILE_M
        mm = min(TILE_M, M - m0)  # the CUDA guard `row < M`
        a_blk = nl.load(A[m0 : m0 + mm, 0:K])  # one DMA, K * 4 contiguous bytes per row
        # A^T per K tile (the CUDA As tiles), transposed once and reused for every N tile
        a_t = nl.ndarray((n_k, nl.par_dim(TILE_K), TILE_M), dtype=A.dtype, buffer=nl.sbuf)
        for k in nl.static_range(n_k):
            k0 = k * TILE_K
            kk = min(TILE_K, K - k0)
            a_t[k, 0:kk, 0:mm] = nl.copy(nl.transpose(a_blk[0:mm, k0 : k0 + kk]))
        for n in nl.static_range((N + TILE_N - 1) // TILE_N):
            n0 = n * TILE_N
            nn = min(TILE_N, N - n0)  # the CUDA guard `col < N`
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            # the CUDA K-tile loop `acc += As[ty][k] * Bs[k][tx]`, 128 k per matmul
            for k in nl.static_range(n_k):
                k0 = k * TILE_K
                kk = min(TILE_K, K - k0)
                b_tile = nl.load(B[k0 : k0 + kk, n0 : n0 + nn])
                acc[0:mm, 0:nn] += nl.matmul(a_t[k, 0:kk, 0:mm], b_tile, transpose_x=True)
            # `acc + bias[col]`: bias row broadcast over the rows by a rank-1 matmul into PSUM
            b_row = nl.load(bias[n0 + nl.arange(nn)[None, :]])
            acc[0:mm, 0:nn] += nl.matmul(ones[0:1, 0:mm], b_row, transpose_x=True)
            # `fmaxf(acc + bias, 0.0f)`: NaN -> 0 like fmaxf, straight out of PSUM
            z = acc[0:mm, 0:nn]
            nl.store(C[m0 : m0 + mm, n0 : n0 + nn], value=nl.where(nl.greater(z, 0.0), z, 0.0))
    return C
