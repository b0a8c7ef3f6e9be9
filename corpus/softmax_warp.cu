// softmax_warp.cu — row softmax with one warp per row:
//   out[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r).
// Layout: in, out row-major float32 [rows, cols], cols <= 32 * MAX_COLS_PER_LANE.
// WARPS_PER_BLOCK rows per 128-thread block. Each lane caches its columns (c = lane + 32 * i) in a
// fully unrolled register array, so the row is read from global memory once; the max and the sum
// are __shfl_xor_sync butterflies (every lane ends with the result, no shared memory, no barrier).
#include <cfloat>
#include <cuda_runtime.h>

#define WARP_SIZE 32
#define WARPS_PER_BLOCK 4
#define MAX_COLS_PER_LANE 32  // rows up to 1024 columns
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int mask = WARP_SIZE / 2; mask > 0; mask >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, mask));
  }
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int mask = WARP_SIZE / 2; mask > 0; mask >>= 1) {
    v += __shfl_xor_sync(FULL_MASK, v, mask);
  }
  return v;
}

template <int COLS_PER_LANE>
__global__ void softmax_warp_kernel(const float* __restrict__ in, float* __restrict__ out,
                                    int rows, int cols) {
  const int lane = threadIdx.x & (WARP_SIZE - 1);
  const int row = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / WARP_SIZE;
  if (row >= rows) return;  // warp-uniform exit
  const float* __restrict__ x = in + static_cast<size_t>(row) * cols;
  float* __restrict__ y = out + static_cast<size_t>(row) * cols;

  float vals[COLS_PER_LANE];
  float m = -FLT_MAX;
#pragma unroll
  for (int i = 0; i < COLS_PER_LANE; ++i) {
    const int c = lane + i * WARP_SIZE;
    vals[i] = c < cols ? x[c] : -FLT_MAX;
    m = fmaxf(m, vals[i]);
  }
  m = warp_max(m);

  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < COLS_PER_LANE; ++i) {
    const int c = lane + i * WARP_SIZE;
    vals[i] = c < cols ? expf(vals[i] - m) : 0.0f;
    s += vals[i];
  }
  s = warp_sum(s);
  const float inv = 1.0f / s;

#pragma unroll
  for (int i = 0; i < COLS_PER_LANE; ++i) {
    const int c = lane + i * WARP_SIZE;
    if (c < cols) y[c] = vals[i] * inv;
  }
}

void launch_softmax_warp(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  const int threads = WARPS_PER_BLOCK * WARP_SIZE;
  const int blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
  softmax_warp_kernel<MAX_COLS_PER_LANE><<<blocks, threads, 0, stream>>>(in, out, rows, cols);
}
