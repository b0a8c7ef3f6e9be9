// transpose_naive.cu — matrix transpose out = in^T, one thread per element, no shared memory.
// Layout: in row-major float32 [rows, cols]; out row-major float32 [cols, rows].
// 2-D grid of 32 x 8 blocks over the input: the read of in is coalesced along a row, the write
// to out is strided by `rows` (the baseline that transpose_tiled.cu improves on). Ragged edges
// are handled by guarding both coordinates.
#include <cuda_runtime.h>

#define BLOCK_X 32
#define BLOCK_Y 8

template <typename T>
__global__ void transpose_naive_kernel(const T* __restrict__ in, T* __restrict__ out, int rows,
                                       int cols) {
  const int col = blockIdx.x * BLOCK_X + threadIdx.x;  // input column = output row
  const int row = blockIdx.y * BLOCK_Y + threadIdx.y;  // input row = output column
  if (row < rows && col < cols) {
    out[static_cast<size_t>(col) * rows + row] = in[static_cast<size_t>(row) * cols + col];
  }
}

void launch_transpose_naive(const float* in, float* out, int rows, int cols,
                            cudaStream_t stream) {
  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((cols + BLOCK_X - 1) / BLOCK_X, (rows + BLOCK_Y - 1) / BLOCK_Y);
  transpose_naive_kernel<float><<<grid, block, 0, stream>>>(in, out, rows, cols);
}
