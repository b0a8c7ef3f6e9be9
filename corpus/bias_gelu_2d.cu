// bias_gelu_2d.cu — fused bias-add + exact GELU over a row-major matrix:
//   out[r, c] = gelu(x[r, c] + bias[c]),  gelu(v) = 0.5 * v * (1 + erf(v / sqrt(2))).
// Layout: x, out are dense row-major [rows, cols]; bias is [cols], broadcast along rows
// (the epilogue of a linear layer in a transformer MLP).
// 2-D grid of 32 x 8 blocks: x over columns (coalesced, and bias reads are shared by the 8 rows),
// y over rows, guarded on both; erff in fp32 with a M_SQRT1_2-style #define constant.
#include <cuda_runtime.h>

#define BLOCK_X 32
#define BLOCK_Y 8
#define GELU_SQRT1_2 0.70710678118654752440f  // 1 / sqrt(2), as M_SQRT1_2

__device__ __forceinline__ float gelu_erf(float v) {
  return 0.5f * v * (1.0f + erff(v * GELU_SQRT1_2));
}

__global__ void bias_gelu_2d_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                    float* __restrict__ out, int rows, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < rows && col < cols) {
    const size_t idx = static_cast<size_t>(row) * cols + col;
    out[idx] = gelu_erf(x[idx] + bias[col]);
  }
}

void launch_bias_gelu_2d(const float* x, const float* bias, float* out, int rows, int cols,
                         cudaStream_t stream) {
  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((cols + BLOCK_X - 1) / BLOCK_X, (rows + BLOCK_Y - 1) / BLOCK_Y);
  bias_gelu_2d_kernel<<<grid, block, 0, stream>>>(x, bias, out, rows, cols);
}
