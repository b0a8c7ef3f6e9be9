// reduce_warp_shuffle.cu — row sums out[r] = sum_c in[r, c] of a rows x cols matrix.
// Layout: in is row-major float32 [rows, cols]; out is float32 [rows].
// One warp per row, WARPS_PER_BLOCK rows per 128-thread block: lanes stride over the columns,
// then a __shfl_down_sync tree folds the 32 lane sums and lane 0 writes the result.
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

__global__ void row_sum_warp_kernel(const float* __restrict__ in, float* __restrict__ out,
                                    int rows, int cols) {
  const int lane = threadIdx.x & (WARP_SIZE - 1);
  const int warp = threadIdx.x / WARP_SIZE;
  const int row = blockIdx.x * WARPS_PER_BLOCK + warp;
  if (row >= rows) return;  // whole warp leaves together

  const float* row_ptr = in + static_cast<size_t>(row) * cols;
  float sum = 0.0f;
  for (int c = lane; c < cols; c += WARP_SIZE) {
    sum += row_ptr[c];
  }
  sum = warp_reduce_sum(sum);
  if (lane == 0) out[row] = sum;
}

void launch_row_sum_warp(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  const int threads = WARPS_PER_BLOCK * WARP_SIZE;
  const int blocks = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
  row_sum_warp_kernel<<<blocks, threads, 0, stream>>>(in, out, rows, cols);
}
