// reduce_sum_shared.cu — first pass of a sum reduction: per-block partial sums.
// Layout: in is a contiguous 1-D float32 array of length n; partial has one float per block,
// ceil(n / (2 * BLOCK)) entries. Each thread loads two elements (i and i + BLOCK), then the
// block halves a shared-memory tree with __syncthreads() and thread 0 writes partial[blockIdx.x].
#include <cuda_runtime.h>

#define BLOCK_SIZE 256

template <unsigned BLOCK>
__global__ void reduce_sum_shared_kernel(const float* __restrict__ in, float* __restrict__ partial,
                                         int n) {
  __shared__ float sdata[BLOCK];
  const unsigned tid = threadIdx.x;
  const int i = static_cast<int>(blockIdx.x * (2 * BLOCK) + tid);

  float sum = 0.0f;
  if (i < n) sum = in[i];
  if (i + static_cast<int>(BLOCK) < n) sum += in[i + BLOCK];
  sdata[tid] = sum;
  __syncthreads();

#pragma unroll
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) {
      sdata[tid] += sdata[tid + s];
    }
    __syncthreads();
  }

  if (tid == 0) partial[blockIdx.x] = sdata[0];
}

cudaError_t launch_reduce_sum_shared(const float* in, float* partial, int n, cudaStream_t stream) {
  const int blocks = (n + 2 * BLOCK_SIZE - 1) / (2 * BLOCK_SIZE);
  reduce_sum_shared_kernel<BLOCK_SIZE><<<blocks, BLOCK_SIZE, 0, stream>>>(in, partial, n);
  return cudaGetLastError();
}
