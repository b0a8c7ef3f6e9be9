// stencil_2d_5pt.cu — one Jacobi (explicit heat-equation) step with the 5-point Laplacian:
//   out[y][x] = in[y][x] + alpha * (in[y-1][x] + in[y+1][x] + in[y][x-1] + in[y][x+1] - 4*in[y][x])
// on the interior 1 <= y < H-1, 1 <= x < W-1; boundary cells (first/last row and column) are
// copied unchanged (Dirichlet boundary). Layout: in, out row-major float32 [H, W], dense.
// One thread per output cell on a 2-D grid of BLOCK_X x BLOCK_Y blocks (template parameters);
// neighbours are read straight from global memory through the `const __restrict__` read-only
// path (the four neighbour loads of a warp are coalesced rows that hit L1), which is how most
// production 5-point stencils are written since Volta.
#include <cuda_runtime.h>

template <int BLOCK_X, int BLOCK_Y>
__global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
    jacobi_5pt_kernel(const float* __restrict__ in, float* __restrict__ out, int H, int W,
                      float alpha) {
  const int x = blockIdx.x * BLOCK_X + threadIdx.x;
  const int y = blockIdx.y * BLOCK_Y + threadIdx.y;
  if (x >= W || y >= H) return;

  const size_t idx = static_cast<size_t>(y) * W + x;
  const float c = in[idx];
  if (x == 0 || y == 0 || x == W - 1 || y == H - 1) {
    out[idx] = c;  // boundary: copy
    return;
  }
  const float north = in[idx - W];
  const float south = in[idx + W];
  const float west = in[idx - 1];
  const float east = in[idx + 1];
  out[idx] = c + alpha * ((north + south + west + east) - 4.0f * c);
}

void launch_jacobi_5pt(const float* in, float* out, int H, int W, float alpha,
                       cudaStream_t stream) {
  constexpr int BX = 32, BY = 8;
  const dim3 block(BX, BY);
  const dim3 grid((W + BX - 1) / BX, (H + BY - 1) / BY);
  jacobi_5pt_kernel<BX, BY><<<grid, block, 0, stream>>>(in, out, H, W, alpha);
}
