"""Hand-written NKI for corpus/hgemm_bf16.cu (C = A @ B, bf16 operands, fp32 output), to compare.

The bf16 operands go to TensorE unwidened (full bf16 rate); products are exact in the PE array
and accumulate in fp32 PSUM, the CUDA `fmaf` chain into a float, and C leaves PSUM as fp32.
A's row blocks are transposed by the DMA engines on the way in (2-byte dtypes transpose in
the DMA, leaving TensorE to the matmuls) and kept in SBUF as the stationary operand for every
N tile; B's K tiles stream as the moving operand, up to 512 columns (one PSUM bank). Shapes
are trace-time constants: ragged M, N and K tails are exact-size tiles, no masks.
hgemm_bf16(A, B) -> C.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

TILE_M = 128  # rows of C per block (stationary free size)
TILE_K = 128  # contraction rows per matmul (partitions)
TILE_N = 512  # columns of C per PSUM bank (moving free size)


@nki.jit
def hgemm_bf16(A, B):
    M, K = A.shape
    N = B.shape[1]
    C = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    n_k = (K + TILE_K - 1) // TILE_K
    for m in nl.static_range((M + TILE_M - 1) // TILE_M):
        m0 = m * TILE_M
        mm = min(TILE_M, M - m0)  # the CUDA guard `row >= M`
        # A[m0:m0+mm, k tile]^T, transposed by the DMA (bf16 stays bf16 in SBUF)
        a_t = nl.ndarray((n_k, nl.par_dim(TILE_K), TILE_M), dtype=A.dtype, buffer=nl.sbuf)
        for k in nl.static_range(n_k):
            k0 = k * TILE_K
            kk = min(TILE_K, K - k0)
            a_t[k, 0:kk, 0:mm] = nisa.dma_transpose(A[m0 : m0 + mm, k0 : k0 + kk])
        for n in nl.static_range((N + TILE_N - 1) // TILE_N):
            n0 = n * TILE_N
            nn = min(TILE_N, N - n0)  # the CUDA guard `col >= N`
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            # `acc = fmaf(to_float(a_row[k]), to_float(B[k * N + col]), acc)`, 128 k per matmul
            for k in nl.static_range(n_k):
                k0 = k * TILE_K
                kk = min(TILE_K, K - k0)
                b_tile = nl.load(B[k0 : k0 + kk, n0 : n0 + nn])
                acc[0:mm, 0:nn] += nl.matmul(a_t[k, 0:kk, 0:mm], b_tile, transpose_x=True)
            nl.store(C[m0 : m0 + mm, n0 : n0 + nn], value=nl.copy(acc[0:mm, 0:nn]))
    return C
