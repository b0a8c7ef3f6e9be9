// batched_gemm.cu — strided batched SGEMM: C[b] = A[b] @ B[b] for b in [0, batch).
// Layout: row-major float32, densely packed batches: A [batch, M, K], B [batch, K, N],
// C [batch, M, N]; batch b starts at b * stride_a / stride_b / stride_c elements
// (as in cublasSgemmStridedBatched).
// Technique: 3-D grid, blockIdx.z selects the batch; each 16 x 16 block stages one TILE x TILE
// tile of A and B in shared memory per step of the K loop (two barriers per step), out-of-range
// loads are zero-filled and the store is guarded, so ragged M, N, K need no special case.
#include <cuda_runtime.h>

#define TILE 16

__global__ void batched_gemm_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K,
                                    long long stride_a, long long stride_b, long long stride_c,
                                    int batch_count) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];

  const int batch = blockIdx.z;
  if (batch >= batch_count) return;  // block-uniform: the whole block leaves together
  const float* __restrict__ Ab = A + batch * stride_a;
  const float* __restrict__ Bb = B + batch * stride_b;
  float* __restrict__ Cb = C + batch * stride_c;

  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;

  float acc = 0.0f;
  const int num_tiles = (K + TILE - 1) / TILE;
  for (int t = 0; t < num_tiles; ++t) {
    const int a_col = t * TILE + tx;
    const int b_row = t * TILE + ty;
    As[ty][tx] = (row < M && a_col < K) ? Ab[row * K + a_col] : 0.0f;
    Bs[ty][tx] = (b_row < K && col < N) ? Bb[b_row * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) {
      acc += As[ty][k] * Bs[k][tx];
    }
    __syncthreads();
  }

  if (row < M && col < N) {
    Cb[row * N + col] = acc;
  }
}

void launch_batched_gemm(const float* A, const float* B, float* C, int M, int N, int K,
                         long long stride_a, long long stride_b, long long stride_c,
                         int batch_count, cudaStream_t stream) {
  const dim3 block(TILE, TILE);
  const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE, batch_count);
  batched_gemm_kernel<<<grid, block, 0, stream>>>(A, B, C, M, N, K, stride_a, stride_b,
                                                  stride_c, batch_count);
}
