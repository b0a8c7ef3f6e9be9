// layernorm.cu — row layer normalisation:
//   y[r, c] = (x[r, c] - mean_r) * rsqrt(var_r + eps) * gamma[c] + beta[c]  (biased variance).
// Layout: x, y row-major float32 [rows, cols]; gamma, beta float32 [cols].
// One BLOCK-thread block per row; block sums are warp shuffles plus a shared array of warp sums.
#include <cuda_runtime.h>

#define LN_THREADS 128
#define WARP_SIZE 32

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(0xffffffff, v, offset);
  }
  return v;
}

// Sum over the block; every thread gets the total. `red` holds BLOCK / WARP_SIZE floats.
template <int BLOCK>
__device__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & (WARP_SIZE - 1);
  const int wid = threadIdx.x / WARP_SIZE;
  v = warp_sum(v);
  if (lane == 0) red[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = (lane < BLOCK / WARP_SIZE) ? red[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) red[0] = v;
  }
  __syncthreads();
  const float total = red[0];
  __syncthreads();  // red may be reused by the next call
  return total;
}

template <int BLOCK>
__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int rows,
                                 int cols, float eps) {
  __shared__ float red[BLOCK / WARP_SIZE];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + static_cast<size_t>(row) * cols;
  float* yr = y + static_cast<size_t>(row) * cols;

  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) sum += xr[c];
  const float mean = block_sum<BLOCK>(sum, red) / cols;

  float sq = 0.0f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) {
    const float d = xr[c] - mean;
    sq += d * d;
  }
  const float inv_std = rsqrtf(block_sum<BLOCK>(sq, red) / cols + eps);

  for (int c = threadIdx.x; c < cols; c += BLOCK) {
    yr[c] = (xr[c] - mean) * inv_std * gamma[c] + beta[c];
  }
}

void launch_layernorm(const float* x, const float* gamma, const float* beta, float* y, int rows,
                      int cols, float eps, cudaStream_t stream) {
  layernorm_kernel<LN_THREADS><<<rows, LN_THREADS, 0, stream>>>(x, gamma, beta, y, rows, cols,
                                                                 eps);
}
