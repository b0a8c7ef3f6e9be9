// separable_rows.cu — the row pass of a separable convolution of a float32 [H, W] image:
//   out[y, x] = sum_{t=-R..R} c_taps[R + t] * img[y, x + t],   img = 0 outside the image,
// R = 5 (11 taps). The taps live in __constant__ memory that the host fills with
// cudaMemcpyToSymbol before the launch (they are an input of the task: `param = "c_taps"`).
// Each 32 x 8 block stages its row segments plus an R-pixel halo on both sides in a shared
// tile, halo pixels past the image stored as 0; threads past the image stop after the barrier.
#include <cuda_runtime.h>

#define SEP_RADIUS 5
#define SEP_TAPS (2 * SEP_RADIUS + 1)
#define ROWS_BX 32
#define ROWS_BY 8

__constant__ float c_taps[SEP_TAPS];

__global__ void separable_rows_kernel(const float* __restrict__ img, float* __restrict__ out,
                                      int width, int height) {
  __shared__ float seg[ROWS_BY][ROWS_BX + 2 * SEP_RADIUS];
  const int x = blockIdx.x * ROWS_BX + threadIdx.x;
  const int y = blockIdx.y * ROWS_BY + threadIdx.y;
  const float* row = img + static_cast<size_t>(y) * width;
  const bool live = y < height;
  // every thread stores its own pixel; the first and last R threads add a halo pixel each
  seg[threadIdx.y][threadIdx.x + SEP_RADIUS] = (live && x < width) ? row[x] : 0.0f;
  if (threadIdx.x < SEP_RADIUS) {
    const int xl = x - SEP_RADIUS;
    seg[threadIdx.y][threadIdx.x] = (live && xl >= 0) ? row[xl] : 0.0f;
  } else if (threadIdx.x >= ROWS_BX - SEP_RADIUS) {
    const int xr = x + SEP_RADIUS;
    seg[threadIdx.y][threadIdx.x + 2 * SEP_RADIUS] = (live && xr < width) ? row[xr] : 0.0f;
  }
  __syncthreads();
  if (!live || x >= width) return;
  float acc = 0.0f;
#pragma unroll
  for (int t = -SEP_RADIUS; t <= SEP_RADIUS; ++t) {
    acc += c_taps[SEP_RADIUS + t] * seg[threadIdx.y][threadIdx.x + SEP_RADIUS + t];
  }
  out[static_cast<size_t>(y) * width + x] = acc;
}

cudaError_t launch_separable_rows(const float* h_taps, const float* img, float* out, int width,
                                  int height, cudaStream_t stream) {
  cudaMemcpyToSymbol(c_taps, h_taps, SEP_TAPS * sizeof(float));
  const dim3 block(ROWS_BX, ROWS_BY);
  const dim3 grid((width + ROWS_BX - 1) / ROWS_BX, (height + ROWS_BY - 1) / ROWS_BY);
  separable_rows_kernel<<<grid, block, 0, stream>>>(img, out, width, height);
  return cudaGetLastError();
}
