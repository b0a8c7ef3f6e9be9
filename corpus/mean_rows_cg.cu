// mean_rows_cg.cu — row means: mean[r] = (1 / cols) * sum_c x[r, c] of a rows x cols matrix.
// Layout: x row-major float32 [rows, cols]; mean float32 [rows].
// Cooperative groups: the 256-thread block is split with cg::tiled_partition<32> into eight
// warp tiles, one row per tile (row = block * meta_group_size + meta_group_rank). Lanes stride
// over the columns by thread_rank(), then a warp.shfl_down() tree folds the partial sums and
// rank 0 of the tile writes the mean. A tile past the last row leaves as a whole.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

#define ROWS_PER_BLOCK 8
#define TILE_SIZE 32

__global__ void mean_rows_cg_kernel(const float* __restrict__ x, float* __restrict__ mean,
                                    int rows, int cols) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  const int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  if (row >= rows) return;  // tile-uniform

  const float* __restrict__ xr = x + static_cast<size_t>(row) * cols;
  float sum = 0.0f;
  for (int c = warp.thread_rank(); c < cols; c += TILE_SIZE) sum += xr[c];

#pragma unroll
  for (int offset = TILE_SIZE / 2; offset > 0; offset >>= 1) {
    sum += warp.shfl_down(sum, offset);
  }
  if (warp.thread_rank() == 0) mean[row] = sum / static_cast<float>(cols);
}

void launch_mean_rows_cg(const float* x, float* mean, int rows, int cols, cudaStream_t stream) {
  const int threads = ROWS_PER_BLOCK * TILE_SIZE;
  const int blocks = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
  mean_rows_cg_kernel<<<blocks, threads, 0, stream>>>(x, mean, rows, cols);
}
