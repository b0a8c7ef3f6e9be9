// transpose_tiled.cu — matrix transpose out = in^T via a padded shared-memory tile.
// Layout: idata row-major float32 [rows, cols]; odata row-major float32 [cols, rows].
// Each 32 x 8 block moves one TILE_DIM x TILE_DIM tile (BLOCK_ROWS rows per step) so both the
// global read and the global write are coalesced; the +1 column avoids shared bank conflicts.
#include <cuda_runtime.h>

#define TILE_DIM 32
#define BLOCK_ROWS 8

__global__ void transpose_tiled_kernel(float* __restrict__ odata, const float* __restrict__ idata,
                                       int rows, int cols) {
  __shared__ float tile[TILE_DIM][TILE_DIM + 1];

  int x = blockIdx.x * TILE_DIM + threadIdx.x;  // input column
  int y = blockIdx.y * TILE_DIM + threadIdx.y;  // input row
#pragma unroll
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < cols && y + j < rows) {
      tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * cols + x];
    }
  }
  __syncthreads();

  x = blockIdx.y * TILE_DIM + threadIdx.x;  // output column = input row
  y = blockIdx.x * TILE_DIM + threadIdx.y;  // output row = input column
#pragma unroll
  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
    if (x < rows && y + j < cols) {
      odata[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
    }
  }
}

void launch_transpose_tiled(float* odata, const float* idata, int rows, int cols,
                            cudaStream_t stream) {
  const dim3 block(TILE_DIM, BLOCK_ROWS);
  const dim3 grid((cols + TILE_DIM - 1) / TILE_DIM, (rows + TILE_DIM - 1) / TILE_DIM);
  transpose_tiled_kernel<<<grid, block, 0, stream>>>(odata, idata, rows, cols);
}
