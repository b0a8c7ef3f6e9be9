// rmsnorm.cu — RMS normalisation (as in LLaMA/T5):
//   y[r, c] = x[r, c] * rsqrt(mean_c(x[r, :]^2) + eps) * weight[c].
// Layout: x, y row-major float32 [rows, cols]; weight float32 [cols].
// One 256-thread block per row: block-stride sum of squares, a __shfl_xor_sync butterfly inside
// each warp, warp partials in a shared array, a second butterfly over the partials, then the
// broadcast inverse RMS (rsqrtf) scales the row.
#include <cuda_runtime.h>

#define RMS_THREADS 256
#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_allreduce_sum(float v) {
#pragma unroll
  for (int mask = WARP_SIZE / 2; mask > 0; mask >>= 1) {
    v += __shfl_xor_sync(FULL_MASK, v, mask);
  }
  return v;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                   float* __restrict__ y, int rows, int cols, float eps) {
  __shared__ float warp_sums[BLOCK / WARP_SIZE];
  __shared__ float s_inv_rms;
  const int row = blockIdx.x;
  if (row >= rows) return;
  const int tid = threadIdx.x;
  const int lane = tid & (WARP_SIZE - 1);
  const int wid = tid / WARP_SIZE;
  const float* __restrict__ xr = x + static_cast<size_t>(row) * cols;
  float* __restrict__ yr = y + static_cast<size_t>(row) * cols;

  float sq = 0.0f;
  for (int c = tid; c < cols; c += BLOCK) {
    const float v = xr[c];
    sq += v * v;
  }
  sq = warp_allreduce_sum(sq);
  if (lane == 0) warp_sums[wid] = sq;
  __syncthreads();

  if (wid == 0) {
    float total = lane < BLOCK / WARP_SIZE ? warp_sums[lane] : 0.0f;
    total = warp_allreduce_sum(total);
    if (lane == 0) s_inv_rms = rsqrtf(total / static_cast<float>(cols) + eps);
  }
  __syncthreads();
  const float inv_rms = s_inv_rms;

  for (int c = tid; c < cols; c += BLOCK) {
    yr[c] = xr[c] * inv_rms * weight[c];
  }
}

void launch_rmsnorm(const float* x, const float* weight, float* y, int rows, int cols, float eps,
                    cudaStream_t stream) {
  rmsnorm_kernel<RMS_THREADS><<<rows, RMS_THREADS, 0, stream>>>(x, weight, y, rows, cols, eps);
}
