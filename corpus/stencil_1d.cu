// stencil_1d.cu — 7-point 1-D stencil out[i] = sum_{k=-R..R} w[k + R] * in[i + k], R = RADIUS,
// with zero values outside [0, n). Layout: in, out contiguous float32 [n].
// Weights live in __constant__ memory (fixed, deliberately asymmetric); each block stages its
// BLOCK_SIZE elements plus RADIUS halo cells on each side in shared memory.
#include <cuda_runtime.h>

#define RADIUS 3
#define BLOCK_SIZE 256

__constant__ float c_weights[2 * RADIUS + 1] = {0.02f, -0.05f, 0.15f, 0.5f, 0.25f, 0.1f, 0.03f};

__global__ void stencil_1d_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float s[BLOCK_SIZE + 2 * RADIUS];
  const int gidx = blockIdx.x * blockDim.x + threadIdx.x;
  const int lidx = threadIdx.x + RADIUS;

  s[lidx] = (gidx < n) ? in[gidx] : 0.0f;
  if (threadIdx.x < RADIUS) {
    const int left = gidx - RADIUS;
    const int right = gidx + BLOCK_SIZE;
    s[lidx - RADIUS] = (left >= 0 && left < n) ? in[left] : 0.0f;
    s[lidx + BLOCK_SIZE] = (right < n) ? in[right] : 0.0f;
  }
  __syncthreads();

  if (gidx >= n) return;
  float acc = 0.0f;
#pragma unroll
  for (int k = -RADIUS; k <= RADIUS; ++k) {
    acc += c_weights[k + RADIUS] * s[lidx + k];
  }
  out[gidx] = acc;
}

void launch_stencil_1d(const float* in, float* out, int n, cudaStream_t stream) {
  const int blocks = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;
  stencil_1d_kernel<<<blocks, BLOCK_SIZE, 0, stream>>>(in, out, n);
}
