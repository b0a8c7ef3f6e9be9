// Per-block partial sums, the first step of a two-pass reduction: each block adds its BLOCK
// consecutive inputs in a shared-memory tree and writes one partial sum. The problem size is
// read from the command line, as benchmark programs do.
#include <cstdlib>

#define BLOCK 128

__global__ void block_sums(const float* in, float* partial) {
  __shared__ float s[BLOCK];
  unsigned t = threadIdx.x;
  s[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}

int main(int argc, char** argv) {
  int n = atoi(argv[1]);  // a multiple of BLOCK
  int blocks = n / BLOCK;
  float *in, *partial;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&partial, blocks * sizeof(float));
  block_sums<<<blocks, BLOCK>>>(in, partial);
  cudaDeviceSynchronize();
  return 0;
}
