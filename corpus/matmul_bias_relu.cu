// matmul_bias_relu.cu — fused linear layer C = relu(A @ B + bias) (GEMM with a bias + ReLU
// epilogue, as in a fully connected layer's forward pass).
// Layout: row-major float32, A [M, K], B [K, N], bias [N] (broadcast over rows), C [M, N].
// Technique: TILE x TILE (32 x 32) thread blocks stage one tile of A and B per step of the K loop
// in shared memory (two barriers per step; B tile padded by one column); out-of-range loads are
// zero-filled, and the epilogue adds bias[col] and clamps with fmaxf before the guarded store.
#include <cuda_runtime.h>

#define TILE 32

__global__ void matmul_bias_relu_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                        const float* __restrict__ bias, float* __restrict__ C,
                                        int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;

  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) {
      acc += As[ty][k] * Bs[k][tx];
    }
    __syncthreads();
  }

  if (row < M && col < N) {
    C[row * N + col] = fmaxf(acc + bias[col], 0.0f);
  }
}

void launch_matmul_bias_relu(const float* A, const float* B, const float* bias, float* C, int M,
                             int N, int K, cudaStream_t stream) {
  const dim3 block(TILE, TILE);
  const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  matmul_bias_relu_kernel<<<grid, block, 0, stream>>>(A, B, bias, C, M, N, K);
}
