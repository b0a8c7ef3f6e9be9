"""Hand-written NKI for corpus/batched_gemm.cu (C[b] = A[b] @ B[b]), for comparison.

Per batch entry, in the style of the optimised NKI matmul tutorials: each 128-row block of A[b]
is transposed on the Tensor engine once and kept in SBUF for every N tile (load hoisting), B[b]
tiles stream as the moving operand, and PSUM accumulates over K. Batches are independent
(affine_range), like the CUDA grid's z dimension. Same calling contract as the generated
kernel: batched_gemm(A, B) -> C.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

TILE_M = 128
TILE_K = 128
TILE_N = 512


@nki.jit
def batched_gemm(A, B):
    Bt, M, K = A.shape
    N = B.shape[2]
    C = nl.ndarray((Bt, M, N), dtype=A.dtype, buffer=nl.shared_hbm)
    n_k = (K + TILE_K - 1) // TILE_K
    for bt in nl.affine_range(Bt):
        for m in nl.affine_range((M + TILE_M - 1) // TILE_M):
            i_m = m * TILE_M + nl.arange(TILE_M)[:, None]
            # A[b] row block, transposed once and reused for every N tile
            a_t = nl.ndarray((n_k, nl.par_dim(TILE_K), TILE_M), dtype=A.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(n_k):
                i_kf = k * TILE_K + nl.arange(TILE_K)[None, :]
                a_tile = nl.zeros((TILE_M, TILE_K), dtype=A.dtype, buffer=nl.sbuf)
                a_tile[...] = nl.load(A[bt, i_m, i_kf], mask=(i_m < M) & (i_kf < K))
                a_t[k] = nl.copy(nl.transpose(a_tile), dtype=A.dtype)
            for n in nl.affine_range((N + TILE_N - 1) // TILE_N):
                i_n = n * TILE_N + nl.arange(TILE_N)[None, :]
                acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)  # fp32 PSUM bank
                for k in nl.affine_range(n_k):
                    i_kp = k * TILE_K + nl.arange(TILE_K)[:, None]
                    b_tile = nl.zeros((TILE_K, TILE_N), dtype=B.dtype, buffer=nl.sbuf)
                    b_tile[...] = nl.load(B[bt, i_kp, i_n], mask=(i_kp < K) & (i_n < N))
                    acc += nl.matmul(a_t[k], b_tile, transpose_x=True)
                ok = (i_m < M) & (i_n < N)  # ragged M, N edges
                nl.store(C[bt, i_m, i_n], value=nl.copy(acc, dtype=C.dtype), mask=ok)
    return C
