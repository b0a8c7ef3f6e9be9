// matmul_naive.cu — dense matrix product C = A @ B, one thread per output element.
// Layout: row-major float32, A [M, K], B [K, N], C [M, N].
// 2-D grid of 16 x 16 blocks: x over columns of C, y over rows; guarded for ragged edges.
#include <cuda_runtime.h>

#define BLOCK_DIM 16

__global__ void matmul_naive_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
      acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
  }
}

void launch_matmul_naive(const float* A, const float* B, float* C, int M, int N, int K,
                         cudaStream_t stream) {
  const dim3 block(BLOCK_DIM, BLOCK_DIM);
  const dim3 grid((N + BLOCK_DIM - 1) / BLOCK_DIM, (M + BLOCK_DIM - 1) / BLOCK_DIM);
  matmul_naive_kernel<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
