// Block-wise inclusive prefix sum (Hillis-Steele) over a 1-D array.
// Each block of BLOCK threads scans its own BLOCK consecutive elements in shared memory:
// out[i] = in[b*BLOCK] + ... + in[i] for i in block b. An unsupported family for migration:
// cuda2nki reports it (C2N2004) rather than emitting a guess.
#include <cuda_runtime.h>

#define BLOCK 256

__global__ void scan_block_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float buf[BLOCK];
  const int tid = threadIdx.x;
  const int i = blockIdx.x * BLOCK + tid;
  buf[tid] = (i < n) ? in[i] : 0.0f;
  __syncthreads();
  for (int offset = 1; offset < BLOCK; offset *= 2) {
    const float v = (tid >= offset) ? buf[tid - offset] : 0.0f;
    __syncthreads();
    buf[tid] += v;
    __syncthreads();
  }
  if (i < n) out[i] = buf[tid];
}

void launch_scan_block(const float* in, float* out, int n, cudaStream_t stream) {
  const int blocks = (n + BLOCK - 1) / BLOCK;
  scan_block_kernel<<<blocks, BLOCK, 0, stream>>>(in, out, n);
}
