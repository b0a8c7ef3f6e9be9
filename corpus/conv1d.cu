// conv1d.cu — 1-D cross-correlation with K taps and "same" zero padding:
//   y[i] = sum_{k=0..K-1} w[k] * x[i + k - K/2],   x[j] = 0 outside [0, n).
// Layout: x, y contiguous float32 [n]; w contiguous float32 [K] (a device tensor, not constant
// memory). K is a compile-time template parameter (the launcher instantiates K = 5).
// Each block of BLOCK_SIZE threads stages its BLOCK_SIZE inputs plus a (K-1)-element halo in a
// shared tile (filled by a block-stride loop, zeros outside the signal) and the K weights in a
// second shared array, then every thread evaluates its K taps from shared memory (unrolled).
#include <cuda_runtime.h>

#define BLOCK_SIZE 256

template <int K>
__global__ void __launch_bounds__(BLOCK_SIZE)
    conv1d_same_kernel(const float* __restrict__ x, const float* __restrict__ w,
                       float* __restrict__ y, int n) {
  constexpr int PAD = K / 2;
  __shared__ float s_x[BLOCK_SIZE + K - 1];
  __shared__ float s_w[K];

  const int base = blockIdx.x * BLOCK_SIZE;
  for (int t = threadIdx.x; t < BLOCK_SIZE + K - 1; t += BLOCK_SIZE) {
    const int g = base + t - PAD;
    s_x[t] = (g >= 0 && g < n) ? x[g] : 0.0f;
  }
  if (threadIdx.x < K) s_w[threadIdx.x] = w[threadIdx.x];
  __syncthreads();

  const int i = base + threadIdx.x;
  if (i < n) {
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      acc += s_w[k] * s_x[threadIdx.x + k];
    }
    y[i] = acc;
  }
}

void launch_conv1d_same(const float* x, const float* w, float* y, int n, cudaStream_t stream) {
  const int blocks = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;
  conv1d_same_kernel<5><<<blocks, BLOCK_SIZE, 0, stream>>>(x, w, y, n);
}
