// col_sum.cu — column sums: out[c] = sum_r in[r, c] of a rows x cols matrix.
// Layout: in row-major float32 [rows, cols]; out float32 [cols].
// 2-D block dim3(32, 8): each block owns a strip of 32 columns. threadIdx.x picks the column, so a
// warp reads 32 consecutive floats of one row (coalesced); threadIdx.y strides over the rows in
// steps of 8. The 8 partial sums per column are folded over threadIdx.y through a padded shared
// tile with __syncthreads() between halving steps, and row 0 of the block writes the strip.
#include <cuda_runtime.h>

#define COLS_PER_BLOCK 32
#define ROW_THREADS 8

__global__ void col_sum_kernel(const float* __restrict__ in, float* __restrict__ out, int rows,
                               int cols) {
  __shared__ float partial[ROW_THREADS][COLS_PER_BLOCK + 1];  // +1: no bank conflicts
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int col = blockIdx.x * COLS_PER_BLOCK + tx;

  float sum = 0.0f;
  if (col < cols) {
    for (int r = ty; r < rows; r += ROW_THREADS) {
      sum += in[static_cast<size_t>(r) * cols + col];
    }
  }
  partial[ty][tx] = sum;
  __syncthreads();

#pragma unroll
  for (int s = ROW_THREADS / 2; s > 0; s >>= 1) {
    if (ty < s) partial[ty][tx] += partial[ty + s][tx];
    __syncthreads();
  }
  if (ty == 0 && col < cols) out[col] = partial[0][tx];
}

void launch_col_sum(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  const dim3 block(COLS_PER_BLOCK, ROW_THREADS);
  const dim3 grid((cols + COLS_PER_BLOCK - 1) / COLS_PER_BLOCK);
  col_sum_kernel<<<grid, block, 0, stream>>>(in, out, rows, cols);
}
