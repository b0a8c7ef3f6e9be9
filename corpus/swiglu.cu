// swiglu.cu — SwiGLU gating of a LLaMA-style MLP: out[r, c] = silu(gate[r, c]) * up[r, c],
// silu(g) = g / (1 + exp(-g)).
// Layout: x is row-major [rows, 2 * cols] holding the fused gate/up projection of each token:
// x[r, 0:cols] is the gate half and x[r, cols:2*cols] the up half; out is row-major [rows, cols].
// 1-D grid-stride loop over rows * cols outputs (grid capped at MAX_BLOCKS), each flat index
// decomposed into (row, col); 64-bit row offsets.
#include <cuda_runtime.h>

#define BLOCK_SIZE 256
#define MAX_BLOCKS 1024

__device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

__global__ void swiglu_kernel(const float* __restrict__ x, float* __restrict__ out, int rows,
                              int cols) {
  const int total = rows * cols;
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += blockDim.x * gridDim.x) {
    const int row = idx / cols;
    const int col = idx - row * cols;
    const float* __restrict__ x_row = x + static_cast<size_t>(row) * (2 * cols);
    const float gate = x_row[col];
    const float up = x_row[cols + col];
    out[idx] = silu(gate) * up;
  }
}

void launch_swiglu(const float* x, float* out, int rows, int cols, cudaStream_t stream) {
  int blocks = (rows * cols + BLOCK_SIZE - 1) / BLOCK_SIZE;
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  swiglu_kernel<<<blocks, BLOCK_SIZE, 0, stream>>>(x, out, rows, cols);
}
