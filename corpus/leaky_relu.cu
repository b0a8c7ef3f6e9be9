// leaky_relu.cu — leaky ReLU: y = x if x > 0 else negative_slope * x.
// Layout: x, y are contiguous 1-D arrays of n elements of type T (float32 in the spec).
// `template <typename T>` kernel computing in fp32, one thread per element with a guard,
// block size from `#define THREADS`; the slope is a runtime float argument (nn.LeakyReLU).
#include <cuda_runtime.h>

#define THREADS 256

template <typename T>
__global__ void leaky_relu_kernel(const T* __restrict__ x, T* __restrict__ y, float negative_slope,
                                  int n) {
  const int i = blockIdx.x * THREADS + threadIdx.x;
  if (i < n) {
    const float v = static_cast<float>(x[i]);
    y[i] = static_cast<T>(v > 0.0f ? v : v * negative_slope);
  }
}

void launch_leaky_relu(const float* x, float* y, float negative_slope, int n,
                       cudaStream_t stream) {
  const int blocks = (n + THREADS - 1) / THREADS;
  leaky_relu_kernel<float><<<blocks, THREADS, 0, stream>>>(x, y, negative_slope, n);
}
