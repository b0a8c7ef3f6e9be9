// saxpy.cu — BLAS-1 SAXPY, y[i] = a * x[i] + y[i], updating y in place.
// Layout: x, y are contiguous 1-D float32 arrays of length n; a is a scalar.
// Grid-stride loop; the launch caps the grid at MAX_BLOCKS so each thread does several elements.
#include <cuda_runtime.h>

#define BLOCK_SIZE 256
#define MAX_BLOCKS 128

__global__ void saxpy_kernel(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  const int stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = a * x[i] + y[i];
  }
}

void launch_saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
  const int threads = BLOCK_SIZE;
  int blocks = (n + threads - 1) / threads;
  blocks = blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
  saxpy_kernel<<<blocks, threads, 0, stream>>>(n, a, x, y);
}
