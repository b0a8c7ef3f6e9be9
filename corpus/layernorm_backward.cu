// layernorm_backward.cu — the backward pass of a row layer norm over x[R, C]:
//   xhat = (x - mean) * rstd,  g = weight * dy
//   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))            (per row)
//   dweight += sum_r xhat * dy,  dbias += sum_r dy                     (per column, accumulated)
// mean and rstd are the forward pass's per-row statistics. One warp per row, four rows per
// 128-thread block: lane-strided loops, the two row means by __shfl_xor_sync butterflies, the
// column gradients accumulated into the caller's dweight / dbias with atomicAdd (gradients
// accumulate across calls, so both are in-place).
#include <cuda_runtime.h>

#define LNB_WARP 32
#define LNB_ROWS_PER_BLOCK 4

__device__ __forceinline__ float lnb_warp_sum(float v) {
#pragma unroll
  for (int m = LNB_WARP / 2; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

__global__ void layernorm_backward_kernel(float* __restrict__ dx, float* __restrict__ dweight,
                                          float* __restrict__ dbias,
                                          const float* __restrict__ dy,
                                          const float* __restrict__ x,
                                          const float* __restrict__ weight,
                                          const float* __restrict__ mean,
                                          const float* __restrict__ rstd, int rows, int cols) {
  const int lane = threadIdx.x % LNB_WARP;
  const int row = blockIdx.x * LNB_ROWS_PER_BLOCK + threadIdx.x / LNB_WARP;
  if (row >= rows) return;  // whole warps leave together: the shuffles below stay full
  const size_t base = static_cast<size_t>(row) * cols;
  const float mu = mean[row], rs = rstd[row];

  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int c = lane; c < cols; c += LNB_WARP) {
    const float xhat = (x[base + c] - mu) * rs;
    const float g = weight[c] * dy[base + c];
    g_sum += g;
    gx_sum += g * xhat;
  }
  const float g_mean = lnb_warp_sum(g_sum) / cols;
  const float gx_mean = lnb_warp_sum(gx_sum) / cols;

  for (int c = lane; c < cols; c += LNB_WARP) {
    const float d = dy[base + c];
    const float xhat = (x[base + c] - mu) * rs;
    dx[base + c] = rs * (weight[c] * d - g_mean - xhat * gx_mean);
    atomicAdd(&dweight[c], xhat * d);
    atomicAdd(&dbias[c], d);
  }
}

cudaError_t launch_layernorm_backward(float* dx, float* dweight, float* dbias, const float* dy,
                                      const float* x, const float* weight, const float* mean,
                                      const float* rstd, int rows, int cols,
                                      cudaStream_t stream) {
  const int blocks = (rows + LNB_ROWS_PER_BLOCK - 1) / LNB_ROWS_PER_BLOCK;
  layernorm_backward_kernel<<<blocks, LNB_WARP * LNB_ROWS_PER_BLOCK, 0, stream>>>(
      dx, dweight, dbias, dy, x, weight, mean, rstd, rows, cols);
  return cudaGetLastError();
}
