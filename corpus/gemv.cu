// gemv.cu — matrix-vector product y = A @ x (SGEMV, no transpose).
// Layout: A row-major float32 [M, K]; x float32 [K]; y float32 [M].
// Technique: one warp per row, WARPS_PER_BLOCK rows per 128-thread block. Lanes stride over K
// (float4 vector loads when K is a multiple of 4, so every row start stays 16-byte aligned;
// scalar loads otherwise), then a __shfl_down_sync tree folds the 32 partial dot products and
// lane 0 writes y[row]. Base pointers are assumed cudaMalloc-aligned.
#include <cuda_runtime.h>

#define WARP_SIZE 32
#define WARPS_PER_BLOCK 4
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(FULL_MASK, v, offset);
  }
  return v;
}

__global__ void gemv_kernel(const float* __restrict__ A, const float* __restrict__ x,
                            float* __restrict__ y, int M, int K) {
  const int lane = threadIdx.x % WARP_SIZE;
  const int warp = threadIdx.x / WARP_SIZE;
  const int row = blockIdx.x * WARPS_PER_BLOCK + warp;
  if (row >= M) return;  // warp-uniform exit

  const float* __restrict__ a_row = A + static_cast<size_t>(row) * K;
  float sum = 0.0f;
  if ((K & 3) == 0) {
    const float4* __restrict__ a4 = reinterpret_cast<const float4*>(a_row);
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const int K4 = K >> 2;
    for (int k = lane; k < K4; k += WARP_SIZE) {
      const float4 a = a4[k];
      const float4 b = x4[k];
      sum += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
  } else {
    for (int k = lane; k < K; k += WARP_SIZE) {
      sum += a_row[k] * x[k];
    }
  }
  sum = warp_reduce_sum(sum);
  if (lane == 0) y[row] = sum;
}

void launch_gemv(const float* A, const float* x, float* y, int M, int K, cudaStream_t stream) {
  const int threads = WARPS_PER_BLOCK * WARP_SIZE;
  const int blocks = (M + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
  gemv_kernel<<<blocks, threads, 0, stream>>>(A, x, y, M, K);
}
