// scale_2d_pitch.cu — 2-D affine map out = alpha * in + beta over a rows x cols matrix.
// Layout: row-major with explicit leading dimensions (row pitch in elements), so both
// matrices may be views into larger allocations: element (r, c) lives at r * ld + c.
// 2-D grid of 32 x 8 thread blocks, x over columns (coalesced), y over rows, guarded on both.
#include <cuda_runtime.h>

#define BLOCK_X 32
#define BLOCK_Y 8

__global__ void scale_2d_pitch_kernel(const float* __restrict__ in, int ld_in,
                                      float* __restrict__ out, int ld_out, int rows, int cols,
                                      float alpha, float beta) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < rows && col < cols) {
    out[row * ld_out + col] = alpha * in[row * ld_in + col] + beta;
  }
}

void launch_scale_2d_pitch(const float* in, int ld_in, float* out, int ld_out, int rows, int cols,
                           float alpha, float beta, cudaStream_t stream) {
  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((cols + BLOCK_X - 1) / BLOCK_X, (rows + BLOCK_Y - 1) / BLOCK_Y);
  scale_2d_pitch_kernel<<<grid, block, 0, stream>>>(in, ld_in, out, ld_out, rows, cols, alpha,
                                                    beta);
}
