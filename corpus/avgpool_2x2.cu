// avgpool_2x2.cu — 2x2 average pooling with stride 2 (no padding) of a single-channel image:
//   out[oy][ox] = 0.25 * (in[2oy][2ox] + in[2oy][2ox+1] + in[2oy+1][2ox] + in[2oy+1][2ox+1]).
// Layout: in row-major [H, W]; out row-major [H/2, W/2] (floor division: with an odd H or W the
// last input row/column is dropped, as PyTorch's AvgPool2d(2) with ceil_mode=False does).
// One thread per output pixel on a 2-D grid of 16 x 16 blocks; the element type is a template
// parameter (launched with float), accumulation is in float. Each thread reads a 2x2 window via
// two row pointers; a warp covers 32 consecutive outputs, i.e. 64 consecutive inputs per row.
#include <cuda_runtime.h>

#define POOL_BLOCK 16

template <typename T>
__global__ void avgpool_2x2_kernel(const T* __restrict__ in, T* __restrict__ out, int H, int W) {
  const int Ho = H / 2;
  const int Wo = W / 2;
  const int ox = blockIdx.x * blockDim.x + threadIdx.x;
  const int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= Wo || oy >= Ho) return;

  const T* __restrict__ row0 = in + static_cast<size_t>(2 * oy) * W + 2 * ox;
  const T* __restrict__ row1 = row0 + W;
  const float s = static_cast<float>(row0[0]) + static_cast<float>(row0[1]) +
                  static_cast<float>(row1[0]) + static_cast<float>(row1[1]);
  out[static_cast<size_t>(oy) * Wo + ox] = static_cast<T>(0.25f * s);
}

void launch_avgpool_2x2(const float* in, float* out, int H, int W, cudaStream_t stream) {
  const int Ho = H / 2, Wo = W / 2;
  const dim3 block(POOL_BLOCK, POOL_BLOCK);
  const dim3 grid((Wo + POOL_BLOCK - 1) / POOL_BLOCK, (Ho + POOL_BLOCK - 1) / POOL_BLOCK);
  avgpool_2x2_kernel<float><<<grid, block, 0, stream>>>(in, out, H, W);
}
