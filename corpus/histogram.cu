// Histogram of integer keys into NUM_BINS bins (key % NUM_BINS), accumulated into `bins`.
// Per-block privatised counts in shared memory, then one atomicAdd per bin into global memory.
// Data-dependent atomic indices: lifted as counts per bin and emitted as compare-and-count.
#include <cuda_runtime.h>

#define NUM_BINS 64
#define THREADS 256

__global__ void histogram_kernel(const int* __restrict__ keys, unsigned int* __restrict__ bins,
                                 int n) {
  __shared__ unsigned int local[NUM_BINS];
  for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) local[b] = 0u;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(&local[keys[i] % NUM_BINS], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

void launch_histogram(const int* keys, unsigned int* bins, int n, cudaStream_t stream) {
  int blocks = (n + THREADS - 1) / THREADS;
  if (blocks > 32) blocks = 32;
  histogram_kernel<<<blocks, THREADS, 0, stream>>>(keys, bins, n);
}
