// Batched C[b] = A[b] @ B[b], one thread per output element, the batch on blockIdx.z.
__global__ void bmm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                    int M, int N, int K) {
  const int b = blockIdx.z;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    const float* a = A + b * M * K;
    const float* bb = B + b * K * N;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += a[row * K + k] * bb[k * N + col];
    C[b * M * N + row * N + col] = acc;
  }
}
void launch_bmm(const float* A, const float* B, float* C, int batch, int M, int N, int K) {
  dim3 block(16, 16);
  dim3 grid((N + 15) / 16, (M + 15) / 16, batch);
  bmm<<<grid, block>>>(A, B, C, M, N, K);
}
