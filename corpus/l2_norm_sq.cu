// l2_norm_sq.cu — squared L2 norm accumulated into a global scalar: result[0] += sum_i x[i]^2.
// Layout: x float32 [n]; result float32 [1], initialised by the caller (e.g. zeroed, or holding
// the running total of earlier chunks).
// Grid-stride loop over a grid capped at MAX_BLOCKS, float4 loads for the aligned body plus a
// scalar tail, a __shfl_down_sync tree inside each warp, and one atomicAdd per warp (lane 0) into
// the global accumulator — no shared memory and no __syncthreads().
#include <cuda_runtime.h>

#define THREADS 256
#define MAX_BLOCKS 80
#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(FULL_MASK, v, offset);
  }
  return v;
}

__global__ void __launch_bounds__(THREADS)
    l2_norm_sq_kernel(const float* __restrict__ x, float* __restrict__ result, int n) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = blockDim.x * gridDim.x;
  float sum = 0.0f;

  const int n4 = n / 4;
  const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
  for (int i = tid; i < n4; i += stride) {
    const float4 v = x4[i];
    sum += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  for (int i = n4 * 4 + tid; i < n; i += stride) {
    const float v = x[i];
    sum += v * v;
  }

  sum = warp_reduce_sum(sum);
  if ((threadIdx.x & (WARP_SIZE - 1)) == 0) atomicAdd(result, sum);
}

void launch_l2_norm_sq(const float* x, float* result, int n, cudaStream_t stream) {
  int blocks = (n + THREADS - 1) / THREADS;
  blocks = blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
  l2_norm_sq_kernel<<<blocks, THREADS, 0, stream>>>(x, result, n);
}
