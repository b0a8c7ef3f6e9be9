// Per-block partial sums with two inputs a thread, added as they are loaded: each block
// takes 2 * 256 consecutive inputs. The host names that work per block as a constant and
// divides the problem by it for the grid.
#define THREADS 256

__global__ void block_sums_x2(const float* in, float* partial) {
  __shared__ float s[THREADS];
  unsigned t = threadIdx.x;
  unsigned i = blockIdx.x * (blockDim.x * 2) + t;
  s[t] = in[i] + in[i + blockDim.x];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}

int main() {
  const int N = 1 << 24;
  int per_block = 2 * THREADS;
  int blocks = N / per_block;
  float *in, *partial;
  cudaMalloc(&in, N * sizeof(float));
  cudaMalloc(&partial, blocks * sizeof(float));
  dim3 grid(blocks, 1);
  dim3 block(THREADS, 1);
  block_sums_x2<<<grid, block>>>(in, partial);
  cudaDeviceSynchronize();
  return 0;
}
