// y = A x with one warp per row, four rows a block: each lane adds every 32nd column, then the
// warp's lanes are summed by shuffles. Written for N a multiple of 32 (N / 32 whole pieces per
// lane: the columns past 32 * (N / 32) are never read). Sizes come from the command line.
#include <cstdlib>

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffff, v, offset);
  return v;
}

__global__ void gemv_warp_rows(const float* A, const float* x, float* y, const int M, const int N) {
  const int warp_size = 32;
  int lane = threadIdx.x % warp_size;
  int row = blockDim.y * blockIdx.x + threadIdx.y;
  if (row < M) {
    float acc = 0.0f;
    int pieces = N / warp_size;
    for (int p = 0; p < pieces; p++) {
      int col = p * warp_size + lane;
      acc += A[row * N + col] * x[col];
    }
    acc = warp_sum(acc);
    if (lane == 0) y[row] = acc;
  }
}

int main(int argc, char** argv) {
  int M = atoi(argv[1]);
  int N = atoi(argv[2]);
  float *A, *x, *y;
  cudaMalloc(&A, M * N * sizeof(float));
  cudaMalloc(&x, N * sizeof(float));
  cudaMalloc(&y, M * sizeof(float));
  dim3 grid(M / 4);
  dim3 block(32, 4);
  gemv_warp_rows<<<grid, block>>>(A, x, y, M, N);
  return 0;
}
