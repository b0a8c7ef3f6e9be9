// separable_conv.cu — a separable convolution of a [height, width] float image, in two passes:
//   rows:    mid[y, x] = sum_{t=-R..R} taps[R + t] * img[y, x + t]
//   columns: out[y, x] = sum_{t=-R..R} taps[R + t] * mid[y + t, x]
// with pixels outside the image read as zero. The taps live in __constant__ memory that the
// host fills with cudaMemcpyToSymbol; each block stages its tile plus an R-pixel halo on both
// sides in shared memory (halo pixels past the image are stored as 0).
#include <cuda_runtime.h>

#define RAD 4
#define NTAPS (2 * RAD + 1)
#define TILE_W 32
#define TILE_H 8

__constant__ float taps[NTAPS];

__global__ void conv_rows(const float* img, float* mid, int width, int height) {
  __shared__ float tile[TILE_H][TILE_W + 2 * RAD];
  const int x = blockIdx.x * TILE_W + threadIdx.x;
  const int y = blockIdx.y * TILE_H + threadIdx.y;
  const bool row_ok = y < height;
  // centre, then the left halo (first RAD threads) and the right halo (last RAD threads)
  tile[threadIdx.y][threadIdx.x + RAD] = (row_ok && x < width) ? img[y * width + x] : 0.0f;
  if (threadIdx.x < RAD) {
    const int xl = x - RAD;
    tile[threadIdx.y][threadIdx.x] = (row_ok && xl >= 0) ? img[y * width + xl] : 0.0f;
  }
  if (threadIdx.x >= TILE_W - RAD) {
    const int xr = x + RAD;
    tile[threadIdx.y][threadIdx.x + 2 * RAD] = (row_ok && xr < width) ? img[y * width + xr] : 0.0f;
  }
  __syncthreads();
  if (!row_ok || x >= width) return;
  float acc = 0.0f;
  for (int t = -RAD; t <= RAD; ++t) acc += taps[RAD + t] * tile[threadIdx.y][threadIdx.x + RAD + t];
  mid[y * width + x] = acc;
}

__global__ void conv_cols(const float* mid, float* out, int width, int height) {
  __shared__ float tile[TILE_H + 2 * RAD][TILE_W];
  const int x = blockIdx.x * TILE_W + threadIdx.x;
  const int y = blockIdx.y * TILE_H + threadIdx.y;
  const bool col_ok = x < width;
  tile[threadIdx.y + RAD][threadIdx.x] = (col_ok && y < height) ? mid[y * width + x] : 0.0f;
  if (threadIdx.y < RAD) {  // TILE_H >= RAD: the first RAD rows of threads fetch both halos
    const int yu = y - RAD;
    const int yd = blockIdx.y * TILE_H + TILE_H + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = (col_ok && yu >= 0) ? mid[yu * width + x] : 0.0f;
    tile[threadIdx.y + TILE_H + RAD][threadIdx.x] =
        (col_ok && yd < height) ? mid[yd * width + x] : 0.0f;
  }
  __syncthreads();
  if (!col_ok || y >= height) return;
  float acc = 0.0f;
  for (int t = -RAD; t <= RAD; ++t) acc += taps[RAD + t] * tile[threadIdx.y + RAD + t][threadIdx.x];
  out[y * width + x] = acc;
}

void separable_conv(const float* h_taps, const float* img, float* mid, float* out, int width,
                    int height) {
  cudaMemcpyToSymbol(taps, h_taps, NTAPS * sizeof(float));
  dim3 block(TILE_W, TILE_H);
  dim3 grid((width + TILE_W - 1) / TILE_W, (height + TILE_H - 1) / TILE_H);
  conv_rows<<<grid, block>>>(img, mid, width, height);
  conv_cols<<<grid, block>>>(mid, out, width, height);
}
