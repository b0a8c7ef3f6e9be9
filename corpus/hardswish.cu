// hardswish.cu — hard swish (MobileNetV3): y = x * min(max(x + 3, 0), 6) / 6.
// Layout: x, y are contiguous 1-D arrays of n floats.
// One thread per element with a guard; __launch_bounds__(256) tells the compiler the block size
// so it can budget registers; fminf/fmaxf clamp (ReLU6) in fp32.
#include <cuda_runtime.h>

#define HS_THREADS 256

__global__ void __launch_bounds__(HS_THREADS)
hardswish_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    y[i] = v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
  }
}

void launch_hardswish(const float* x, float* y, int n, cudaStream_t stream) {
  const int blocks = (n + HS_THREADS - 1) / HS_THREADS;
  hardswish_kernel<<<blocks, HS_THREADS, 0, stream>>>(x, y, n);
}
