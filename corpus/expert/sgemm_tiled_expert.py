"""Hand-written NKI for corpus/matmul_tiled.cu (C = alpha * A @ B + beta * C), for comparison.

Written for cuda2nki in the style of the optimised NKI matmul tutorials: A's row block is
transposed on the Tensor engine once and kept in SBUF for every N tile (load hoisting); B tiles
stream as the moving operand; PSUM accumulates over K. Same calling contract as the generated
kernel: sgemm_tiled(A, B, C, *, alpha, beta) -> C.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

TILE_M = 128
TILE_K = 128
TILE_N = 512


@nki.jit
def sgemm_tiled(A, B, C, *, alpha, beta):
    M, K = A.shape
    N = B.shape[1]
    out = nl.ndarray((M, N), dtype=C.dtype, buffer=nl.shared_hbm)
    n_k = (K + TILE_K - 1) // TILE_K
    for m in nl.affine_range((M + TILE_M - 1) // TILE_M):
        i_m = m * TILE_M + nl.arange(TILE_M)[:, None]
        a_t = nl.ndarray((n_k, nl.par_dim(TILE_K), TILE_M), dtype=A.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(n_k):
            i_kf = k * TILE_K + nl.arange(TILE_K)[None, :]
            a_tile = nl.zeros((TILE_M, TILE_K), dtype=A.dtype, buffer=nl.sbuf)
            a_tile[...] = nl.load(A[i_m, i_kf], mask=(i_m < M) & (i_kf < K))
            a_t[k] = nl.copy(nl.transpose(a_tile), dtype=A.dtype)
        for n in nl.affine_range((N + TILE_N - 1) // TILE_N):
            i_n = n * TILE_N + nl.arange(TILE_N)[None, :]
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(n_k):
                i_kp = k * TILE_K + nl.arange(TILE_K)[:, None]
                b_tile = nl.zeros((TILE_K, TILE_N), dtype=B.dtype, buffer=nl.sbuf)
                b_tile[...] = nl.load(B[i_kp, i_n], mask=(i_kp < K) & (i_n < N))
                acc += nl.matmul(a_t[k], b_tile, transpose_x=True)
            ok = (i_m < M) & (i_n < N)
            c_tile = nl.load(C[i_m, i_n], mask=ok)
            res = nl.add(nl.multiply(acc, alpha), nl.multiply(c_tile, beta))
            nl.store(out[i_m, i_n], value=res, mask=ok)
    return out
