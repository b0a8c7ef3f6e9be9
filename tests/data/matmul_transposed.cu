// C[M, N] = A^T @ B^T with A stored [K, M] and B stored [N, K] (both "transposed" operands).
__global__ void matmul_tt(const float* __restrict__ A, const float* __restrict__ B,
                          float* __restrict__ C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[k * M + row] * B[col * K + k];
    C[row * N + col] = acc;
  }
}
void launch_matmul_tt(const float* A, const float* B, float* C, int M, int N, int K) {
  dim3 block(16, 16);
  dim3 grid((N + 15) / 16, (M + 15) / 16);
  matmul_tt<<<grid, block>>>(A, B, C, M, N, K);
}
