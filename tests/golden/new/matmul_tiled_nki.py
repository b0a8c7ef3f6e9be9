"""Matrix multiply with PSUM accumulation over K tiles

Migrated by cuda2nki from matmul_tiled.cu (kernel `sgemm_tiled_kernel`, family matmul, shared_tiled),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    sgemm_tiled(A, B, C, *, alpha, beta) -> C
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="sgemm_tiled_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


TILE_M = 128  # output rows per tile = stationary free size (gemm_stationary_fmax)
TILE_K = 128  # contraction per matmul = partitions (pmax)
TILE_N = 512  # output columns per tile = moving free size = one PSUM bank of fp32


@nki.jit
def sgemm_tiled(A, B, C, *, alpha, beta):
    M = A.shape[0]
    N = B.shape[1]
    K = A.shape[1]

    C_out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)

    # ragged edges: every tile is cut to the matrix at trace time
    for m in nl.affine_range((M + TILE_M - 1) // TILE_M):
        m0 = m * TILE_M
        ms = min(TILE_M, M - m0)
        for n in nl.affine_range((N + TILE_N - 1) // TILE_N):
            n0 = n * TILE_N
            ns = min(TILE_N, N - n0)
            # from matmul_tiled.cu:28 — the per-thread accumulator becomes a PSUM tile, accumulated over K tiles
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in range((K + TILE_K - 1) // TILE_K):
                k0 = k * TILE_K
                ks = min(TILE_K, K - k0)
                # from matmul_tiled.cu:34 — A is row-major [M, K]: row-major tiles are transposed on the Tensor engine
                a_t = nl.ndarray((TILE_K, TILE_M), dtype=nl.float32, buffer=nl.sbuf)
                a_tile = nl.ndarray((TILE_M, TILE_K), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_tile[0:ms, 0:ks], src=A[m0 : m0 + ms, k0 : k0 + ks])
                a_flip = nl.ndarray((TILE_K, TILE_M), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_transpose(dst=a_flip[0:ks, 0:ms], data=a_tile[0:ms, 0:ks])
                nisa.tensor_copy(dst=a_t[0:ks, 0:ms], src=a_flip[0:ks, 0:ms])
                b_tile = nl.ndarray((TILE_K, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_tile[0:ks, 0:ns], src=B[k0 : k0 + ks, n0 : n0 + ns])
                nisa.nc_matmul(dst=acc[0:ms, 0:ns], stationary=a_t[0:ks, 0:ms], moving=b_tile[0:ks, 0:ns])
            # from matmul_tiled.cu:34 — C[row * ldc + col] = alpha * acc + beta * C[row * ldc + col];
            res = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:ms, 0:ns], src=acc[0:ms, 0:ns])
            out_tile = res[0:ms, 0:ns]
            out_tile = nl.multiply(out_tile, alpha)
            c_tile = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=c_tile[0:ms, 0:ns], src=C[m0 : m0 + ms, n0 : n0 + ns])
            out_tile = nl.add(out_tile, nl.multiply(c_tile[0:ms, 0:ns], beta))
            nl.store(C_out[m0 : m0 + ms, n0 : n0 + ns], value=out_tile)
    return C_out
