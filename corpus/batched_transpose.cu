// batched_transpose.cu — batched matrix transpose out[b] = in[b]^T for b in [0, batch).
// Layout: in row-major float32 [batch, rows, cols]; out row-major float32 [batch, cols, rows],
// both densely packed (matrix stride rows * cols).
// blockIdx.z selects the matrix; each 32 x 8 block moves one TILE_DIM x TILE_DIM tile through a
// padded shared array ([TILE_DIM][TILE_DIM + 1], no bank conflicts on the column read) so both
// the global read and the global write are coalesced. Ragged tiles are guarded on both sides.
#include <cuda_runtime.h>

#define TILE_DIM 32
#define BLOCK_ROWS 8

__global__ void __launch_bounds__(TILE_DIM * BLOCK_ROWS)
    batched_transpose_kernel(const float* __restrict__ in, float* __restrict__ out, int batch,
                             int rows, int cols) {
  __shared__ float tile[TILE_DIM][TILE_DIM + 1];

  const int b = blockIdx.z;
  if (b >= batch) return;  // block-uniform
  const size_t mat = static_cast<size_t>(rows) * cols;
  const float* __restrict__ src = in + b * mat;
  float* __restrict__ dst = out + b * mat;

  int x = blockIdx.x * TILE_DIM + threadIdx.x;  // input column
  int y = blockIdx.y * TILE_DIM + threadIdx.y;  // input row
#pragma unroll
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < cols && y + j < rows) {
      tile[threadIdx.y + j][threadIdx.x] = src[static_cast<size_t>(y + j) * cols + x];
    }
  }
  __syncthreads();

  x = blockIdx.y * TILE_DIM + threadIdx.x;  // output column = input row
  y = blockIdx.x * TILE_DIM + threadIdx.y;  // output row = input column
#pragma unroll
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < rows && y + j < cols) {
      dst[static_cast<size_t>(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
    }
  }
}

cudaError_t launch_batched_transpose(const float* in, float* out, int batch, int rows, int cols,
                                     cudaStream_t stream) {
  const dim3 block(TILE_DIM, BLOCK_ROWS);
  const dim3 grid((cols + TILE_DIM - 1) / TILE_DIM, (rows + TILE_DIM - 1) / TILE_DIM, batch);
  batched_transpose_kernel<<<grid, block, 0, stream>>>(in, out, batch, rows, cols);
  return cudaGetLastError();
}
