// hgemm_bf16.cu — mixed-precision GEMM C = A @ B with bfloat16 operands and float32
// accumulation and output (the "bf16 in, fp32 out" GEMM of mixed-precision training).
// Layout: row-major, A __nv_bfloat16 [M, K], B __nv_bfloat16 [K, N], C float32 [M, N].
// Technique: templated on the input type, one thread per output element on a 2-D grid of
// 16 x 16 blocks; each operand is widened with __bfloat162float before the fused multiply-add
// (fmaf), the sum is kept in a float register and written once; ragged guards on M and N.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define BLOCK_DIM 16

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename TIn>
__global__ void hgemm_bf16_kernel(const TIn* __restrict__ A, const TIn* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;

  const TIn* __restrict__ a_row = A + static_cast<size_t>(row) * K;
  float acc = 0.0f;
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    acc = fmaf(to_float(a_row[k]), to_float(B[static_cast<size_t>(k) * N + col]), acc);
  }
  C[static_cast<size_t>(row) * N + col] = acc;
}

void launch_hgemm_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N,
                       int K, cudaStream_t stream) {
  const dim3 block(BLOCK_DIM, BLOCK_DIM);
  const dim3 grid((N + BLOCK_DIM - 1) / BLOCK_DIM, (M + BLOCK_DIM - 1) / BLOCK_DIM);
  hgemm_bf16_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
