// gemm_tn.cu — C = A^T @ B (the "TN" GEMM: A transposed, B not), one thread per output.
// Layout: row-major float32 with leading dimensions. A is stored [K, M] (lda >= M), i.e. the
// column-major M x K operand that cuBLAS reads with CUBLAS_OP_T; B is [K, N] (ldb), C is
// [M, N] (ldc). C[m, n] = sum_k A[k, m] * B[k, n].
// Technique: 2-D grid of 16 x 16 blocks, x over columns of C so the B loads and C stores are
// coalesced (A[k, m] is a warp-wide broadcast); inner K loop unrolled by 4, ragged guards.
#include <cuda_runtime.h>

#define BLOCK_X 16
#define BLOCK_Y 16

__global__ void gemm_tn_kernel(int M, int N, int K, const float* __restrict__ A, int lda,
                               const float* __restrict__ B, int ldb, float* __restrict__ C,
                               int ldc) {
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= M || n >= N) return;

  float acc = 0.0f;
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    acc += A[k * lda + m] * B[k * ldb + n];
  }
  C[m * ldc + n] = acc;
}

void launch_gemm_tn(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                    float* C, int ldc, cudaStream_t stream) {
  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
  gemm_tn_kernel<<<grid, block, 0, stream>>>(M, N, K, A, lda, B, ldb, C, ldc);
}
