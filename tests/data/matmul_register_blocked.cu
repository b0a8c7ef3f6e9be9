// Register-blocked: each thread computes a 1x4 strip of C.
__global__ void mm_rb(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (row < M) {
    for (int k = 0; k < K; ++k) {
      float a = A[row * K + k];
#pragma unroll
      for (int j = 0; j < 4; ++j) if (col0 + j < N) acc[j] += a * B[k * N + col0 + j];
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) if (col0 + j < N) C[row * N + col0 + j] = acc[j];
  }
}
void launch_mm_rb(const float* A, const float* B, float* C, int M, int N, int K) {
  dim3 block(16, 16);
  dim3 grid((N + 63) / 64, (M + 15) / 16);
  mm_rb<<<grid, block>>>(A, B, C, M, N, K);
}
