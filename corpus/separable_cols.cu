// separable_cols.cu — the column pass of a separable convolution of a float32 [H, W] image:
//   out[y, x] = sum_{t=-R..R} c_taps[R + t] * img[y + t, x],   img = 0 outside the image,
// R = 5 (11 taps). The taps live in __constant__ memory that the host fills with
// cudaMemcpyToSymbol before the launch (they are an input of the task: `param = "c_taps"`).
// Each 16 x 16 block stages its column segments plus an R-row halo above and below in a shared
// tile (a block-stride loop over the tile's rows, rows past the image stored as 0).
#include <cuda_runtime.h>

#define SEP_RADIUS 5
#define SEP_TAPS (2 * SEP_RADIUS + 1)
#define COLS_B 16

__constant__ float c_taps[SEP_TAPS];

__global__ void separable_cols_kernel(const float* __restrict__ img, float* __restrict__ out,
                                      int width, int height) {
  __shared__ float seg[COLS_B + 2 * SEP_RADIUS][COLS_B + 1];  // +1: no bank conflicts
  const int x = blockIdx.x * COLS_B + threadIdx.x;
  const int y0 = blockIdx.y * COLS_B - SEP_RADIUS;  // the tile's first (halo) row
  for (int r = threadIdx.y; r < COLS_B + 2 * SEP_RADIUS; r += COLS_B) {
    const int y = y0 + r;
    seg[r][threadIdx.x] = (x < width && y >= 0 && y < height) ? img[y * width + x] : 0.0f;
  }
  __syncthreads();
  const int y = blockIdx.y * COLS_B + threadIdx.y;
  if (x < width && y < height) {
    float acc = 0.0f;
#pragma unroll
    for (int t = 0; t < SEP_TAPS; ++t) acc += c_taps[t] * seg[threadIdx.y + t][threadIdx.x];
    out[y * width + x] = acc;
  }
}

cudaError_t launch_separable_cols(const float* h_taps, const float* img, float* out, int width,
                                  int height, cudaStream_t stream) {
  cudaMemcpyToSymbol(c_taps, h_taps, SEP_TAPS * sizeof(float));
  const dim3 block(COLS_B, COLS_B);
  const dim3 grid((width + COLS_B - 1) / COLS_B, (height + COLS_B - 1) / COLS_B);
  separable_cols_kernel<<<grid, block, 0, stream>>>(img, out, width, height);
  return cudaGetLastError();
}
