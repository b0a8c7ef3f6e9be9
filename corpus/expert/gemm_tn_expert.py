"""Hand-written NKI for corpus/gemm_tn.cu (C = A^T @ B with A stored [K, M], float32), to compare.

A stored [K, M] is already TensorE's stationary layout (contraction on the partitions), so its
[K tile, 128 columns] blocks are DMA'd straight into SBUF and kept for every N tile: no
transpose at all. B's K tiles stream as the moving operand (up to 512 columns, one PSUM bank)
and PSUM accumulates them in fp32 (the first matmul of a group overwrites, so no memset).
Shapes are trace-time constants: ragged M, N and K tails are exact-size tiles, no masks.
gemm_tn(A, B) -> C.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

TILE_M = 128  # rows of C per block (stationary free size)
TILE_K = 128  # contraction rows per matmul (partitions)
TILE_N = 512  # columns of C per PSUM bank (moving free size)


@nki.jit
def gemm_tn(A, B):
    K, M = A.shape
    N = B.shape[1]
    C = nl.ndarray((M, N), dtype=A.dtype, buffer=nl.shared_hbm)
    n_k = (K + TILE_K - 1) // TILE_K
    for m in nl.static_range((M + TILE_M - 1) // TILE_M):
        m0 = m * TILE_M
        mm = min(TILE_M, M - m0)  # the CUDA guard `m >= M`
        # A[k, m0:m0+mm] (lda = M): the stationary tiles exactly as stored
        a_t = nl.ndarray((n_k, nl.par_dim(TILE_K), TILE_M), dtype=A.dtype, buffer=nl.sbuf)
        for k in nl.static_range(n_k):
            k0 = k * TILE_K
            kk = min(TILE_K, K - k0)
            a_t[k, 0:kk, 0:mm] = nl.load(A[k0 : k0 + kk, m0 : m0 + mm])
        for n in nl.static_range((N + TILE_N - 1) // TILE_N):
            n0 = n * TILE_N
            nn = min(TILE_N, N - n0)  # the CUDA guard `n >= N`
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            # the CUDA loop `acc += A[k * lda + m] * B[k * ldb + n]`, 128 k per matmul
            for k in nl.static_range(n_k):
                k0 = k * TILE_K
                kk = min(TILE_K, K - k0)
                b_tile = nl.load(B[k0 : k0 + kk, n0 : n0 + nn])
                acc[0:mm, 0:nn] += nl.matmul(a_t[k, 0:kk, 0:mm], b_tile, transpose_x=True)
            # `C[m * ldc + n] = acc` (ldc = N)
            nl.store(C[m0 : m0 + mm, n0 : n0 + nn], value=nl.copy(acc[0:mm, 0:nn]))
    return C
