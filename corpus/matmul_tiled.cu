// matmul_tiled.cu — SGEMM C = alpha * A @ B + beta * C with shared-memory tiling.
// Layout: row-major float32 with leading dimensions, A [M, K] (lda), B [K, N] (ldb),
// C [M, N] (ldc), read and overwritten. TILE x TILE blocks stage one tile of A and B per step
// of the K loop; out-of-range loads are zero-filled so ragged M, N, K need no special case.
#include <cuda_runtime.h>

#define TILE 16

__global__ void sgemm_tiled_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                                   int lda, const float* __restrict__ B, int ldb, float beta,
                                   float* __restrict__ C, int ldc) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;

  float acc = 0.0f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    const int a_col = t * TILE + tx;
    const int b_row = t * TILE + ty;
    As[ty][tx] = (row < M && a_col < K) ? A[row * lda + a_col] : 0.0f;
    Bs[ty][tx] = (b_row < K && col < N) ? B[b_row * ldb + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) {
      acc += As[ty][k] * Bs[k][tx];
    }
    __syncthreads();
  }

  if (row < M && col < N) {
    C[row * ldc + col] = alpha * acc + beta * C[row * ldc + col];
  }
}

void launch_sgemm_tiled(int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                        int ldb, float beta, float* C, int ldc, cudaStream_t stream) {
  const dim3 block(TILE, TILE);
  const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  sgemm_tiled_kernel<<<grid, block, 0, stream>>>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
