// Per-block partial sums whose block is a host `const int`, not a macro: the output holds
// one sum a block, `(N + BLOCK - 1) / BLOCK` of them, and the kernel takes no size at all
// (the problem's size is a file-scope constant it reads, as textbook examples write).
const int N = 1 << 26;
const int BLOCK = 128;

__global__ void block_sums_const(const float* x, float* partial) {
  __shared__ float s[BLOCK];
  const int t = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + t;
  s[t] = (i < N) ? x[i] : 0.0f;
  __syncthreads();
  for (int half = blockDim.x >> 1; half > 0; half >>= 1) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}

int main() {
  const int grid = (N + BLOCK - 1) / BLOCK;
  float *x, *partial;
  cudaMalloc(&x, N * sizeof(float));
  cudaMalloc(&partial, grid * sizeof(float));
  block_sums_const<<<grid, BLOCK>>>(x, partial);
  cudaDeviceSynchronize();
  return 0;
}
