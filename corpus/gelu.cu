// gelu.cu — GELU activation, tanh approximation:
//   y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), computed in fp32.
// Layout: x, y are contiguous 1-D arrays of length n (element type T, float32 in the spec).
// Grid-stride loop over a grid capped at MAX_BLOCKS; relu_kernel is a sibling using the same shape.
#include <cuda_runtime.h>

#define BLOCK_SIZE 256
#define MAX_BLOCKS 160

__device__ __forceinline__ float gelu_tanh(float v) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  const float kCoeff = 0.044715f;
  const float inner = kSqrt2OverPi * (v + kCoeff * v * v * v);
  return 0.5f * v * (1.0f + tanhf(inner));
}

template <typename T>
__global__ void gelu_kernel(const T* __restrict__ x, T* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const float v = static_cast<float>(x[i]);
    y[i] = static_cast<T>(gelu_tanh(v));
  }
}

template <typename T>
__global__ void relu_kernel(const T* __restrict__ x, T* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = static_cast<T>(fmaxf(static_cast<float>(x[i]), 0.0f));
  }
}

static inline int grid_for(int n) {
  const int blocks = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;
  return blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
}

void launch_gelu(const float* x, float* y, int n, cudaStream_t stream) {
  gelu_kernel<float><<<grid_for(n), BLOCK_SIZE, 0, stream>>>(x, y, n);
}

void launch_relu(const float* x, float* y, int n, cudaStream_t stream) {
  relu_kernel<float><<<grid_for(n), BLOCK_SIZE, 0, stream>>>(x, y, n);
}
