// relu_half.cu — ReLU on half-precision activations: y = max(x, 0).
// Layout: x, y are contiguous 1-D arrays of n __half values (float16 in the spec).
// One thread per element with an `if (i < n)` guard; each value is widened with __half2float,
// compared in fp32 and narrowed back with __float2half (exact for ReLU).
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define BLOCK_SIZE 256

__global__ void relu_half_kernel(const __half* __restrict__ x, __half* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = __half2float(x[i]);
    y[i] = __float2half(v > 0.0f ? v : 0.0f);
  }
}

void launch_relu_half(const __half* x, __half* y, int n, cudaStream_t stream) {
  const int blocks = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;
  relu_half_kernel<<<blocks, BLOCK_SIZE, 0, stream>>>(x, y, n);
}
