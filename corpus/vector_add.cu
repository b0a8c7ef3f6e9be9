// vector_add.cu — elementwise vector sum c[i] = a[i] + b[i].
// Layout: a, b, c are contiguous 1-D float32 arrays of length n.
// One thread per element with a bounds guard; grid = ceil(n / BLOCK_SIZE).
#include <cuda_runtime.h>

#define BLOCK_SIZE 256

__global__ void vector_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = a[i] + b[i];
  }
}

void launch_vector_add(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
  const int threads = BLOCK_SIZE;
  const int blocks = (n + threads - 1) / threads;
  vector_add_kernel<<<blocks, threads, 0, stream>>>(a, b, c, n);
}
