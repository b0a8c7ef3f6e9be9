// sigmoid_vec4.cu — logistic sigmoid y = 1 / (1 + exp(-x)) over a float32 vector.
// Layout: x, y are contiguous 1-D arrays of n floats, 16-byte aligned (cudaMalloc'd).
// The body is read and written as float4 (reinterpret_cast, 128-bit transactions) in a grid-stride
// loop over n / 4 vectors; a scalar grid-stride tail handles the last n % 4 elements.
#include <cuda_runtime.h>

#define BLOCK_SIZE 256
#define VEC 4
#define MAX_BLOCKS 1024

__device__ __forceinline__ float sigmoidf(float v) { return 1.0f / (1.0f + __expf(-v)); }

__global__ void sigmoid_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = blockDim.x * gridDim.x;
  const int n_vec = n / VEC;
  const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
  float4* __restrict__ y4 = reinterpret_cast<float4*>(y);

  for (int i = tid; i < n_vec; i += stride) {
    const float4 v = x4[i];
    float4 r;
    r.x = sigmoidf(v.x);
    r.y = sigmoidf(v.y);
    r.z = sigmoidf(v.z);
    r.w = sigmoidf(v.w);
    y4[i] = r;
  }
  // scalar tail: the n % 4 elements past the last full vector
  for (int i = n_vec * VEC + tid; i < n; i += stride) {
    y[i] = sigmoidf(x[i]);
  }
}

void launch_sigmoid_vec4(const float* x, float* y, int n, cudaStream_t stream) {
  int blocks = (n + BLOCK_SIZE * VEC - 1) / (BLOCK_SIZE * VEC);
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  sigmoid_vec4_kernel<<<blocks, BLOCK_SIZE, 0, stream>>>(x, y, n);
}
