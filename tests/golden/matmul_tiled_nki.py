"""Matrix multiply with PSUM accumulation over K tiles

Migrated by cuda2nki from matmul_tiled.cu (kernel `sgemm_tiled_kernel`, family matmul, shared_tiled).
Calling convention (cuda2nki task contract 1.0):
    sgemm_tiled(A, B, C, *, alpha, beta) -> C
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="sgemm_tiled_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


TILE_M = 128  # output rows per tile = stationary free size (gemm_stationary_fmax)
TILE_K = 128  # contraction per matmul = partitions (pmax)
TILE_N = 512  # output columns per tile = moving free size = one PSUM bank of fp32


@nki.jit
def sgemm_tiled(A, B, C, *, alpha, beta):
    M = A.shape[0]
    N = B.shape[1]
    K = A.shape[1]

    C_out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)

    # tiles no larger than the matrices: a small M, N or K wastes no TensorE rows or columns
    tm, tn, tk = min(TILE_M, M), min(TILE_N, N), min(TILE_K, K)
    # ragged edges: masked loads into zeroed tiles, masked stores
    for m in nl.affine_range((M + tm - 1) // tm):
        for n in nl.affine_range((N + tn - 1) // tn):
            # from matmul_tiled.cu:28 — the per-thread accumulator becomes a PSUM tile, accumulated over K tiles
            acc = nl.zeros((tm, tn), nl.float32, buffer=nl.psum)
            for k in nl.affine_range((K + tk - 1) // tk):
                # from matmul_tiled.cu:34 — A is row-major [M, K]: row-major tiles are transposed on the Tensor engine
                i_m = m * tm + nl.arange(tm)[:, None]
                i_kf = k * tk + nl.arange(tk)[None, :]
                a_tile = nl.zeros((tm, tk), dtype=nl.float32, buffer=nl.sbuf)
                a_tile[...] = nl.load(A[i_m, i_kf], mask=(i_m < M) & (i_kf < K))
                a_t = nl.copy(nl.transpose(a_tile), dtype=nl.float32)
                i_kp = k * tk + nl.arange(tk)[:, None]
                i_n = n * tn + nl.arange(tn)[None, :]
                b_tile = nl.zeros((tk, tn), dtype=nl.float32, buffer=nl.sbuf)
                b_tile[...] = nl.load(B[i_kp, i_n], mask=(i_kp < K) & (i_n < N))
                acc += nl.matmul(a_t, b_tile, transpose_x=True)
            # from matmul_tiled.cu:34 — C[row * ldc + col] = alpha * acc + beta * C[row * ldc + col];
            i_mo = m * tm + nl.arange(tm)[:, None]
            i_no = n * tn + nl.arange(tn)[None, :]
            out_ok = (i_mo < M) & (i_no < N)
            res = nl.multiply(acc, alpha)
            c_tile = nl.load(C[i_mo, i_no], mask=out_ok)
            res = nl.add(res, nl.multiply(c_tile, beta))
            nl.store(C_out[i_mo, i_no], value=res, mask=out_ok)
    return C_out
