// Dot product of two vectors, accumulated into a single global value with atomicAdd.
// Each block reduces its grid-stride share in shared memory (tree), then thread 0 adds the
// block's partial sum into *result (which the host initialises). result[0] += sum(x[i] * y[i]).
#include <cuda_runtime.h>

#define THREADS 256
#define MAX_BLOCKS 64

__global__ void dot_atomic_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                  float* __restrict__ result, int n) {
  __shared__ float partial[THREADS];
  float sum = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    sum += x[i] * y[i];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(&result[0], partial[0]);
}

void launch_dot_atomic(const float* x, const float* y, float* result, int n, cudaStream_t stream) {
  int blocks = (n + THREADS - 1) / THREADS;
  blocks = blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
  dot_atomic_kernel<<<blocks, THREADS, 0, stream>>>(x, y, result, n);
}
