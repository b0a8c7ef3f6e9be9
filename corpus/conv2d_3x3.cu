// 3x3 2-D convolution (cross-correlation) of an [H, W] image with constant weights, zero padding.
// Each 16x16 block loads its tile plus a one-pixel halo into shared memory, then every thread
// computes out[y][x] = sum_{dy,dx} w[dy+1][dx+1] * in[y+dy][x+dx] (outside the image: 0).
#include <cuda_runtime.h>

#define TILE 16
#define R 1

__constant__ float c_w[3][3] = {{0.0625f, 0.125f, 0.0625f},
                                {0.125f, 0.25f, 0.125f},
                                {0.0625f, -0.125f, 0.0625f}};

__global__ void conv2d_3x3_kernel(const float* __restrict__ in, float* __restrict__ out, int H,
                                  int W) {
  __shared__ float s[TILE + 2 * R][TILE + 2 * R];
  const int x = blockIdx.x * TILE + threadIdx.x;
  const int y = blockIdx.y * TILE + threadIdx.y;
  // cooperative load of the (TILE+2R)^2 tile with halo
  for (int dy = threadIdx.y; dy < TILE + 2 * R; dy += TILE) {
    for (int dx = threadIdx.x; dx < TILE + 2 * R; dx += TILE) {
      const int gy = blockIdx.y * TILE + dy - R;
      const int gx = blockIdx.x * TILE + dx - R;
      const bool inside = (gy >= 0) && (gy < H) && (gx >= 0) && (gx < W);
      s[dy][dx] = inside ? in[gy * W + gx] : 0.0f;
    }
  }
  __syncthreads();
  if (y < H && x < W) {
    float acc = 0.0f;
#pragma unroll
    for (int ky = -R; ky <= R; ++ky) {
#pragma unroll
      for (int kx = -R; kx <= R; ++kx) {
        acc += c_w[ky + R][kx + R] * s[threadIdx.y + R + ky][threadIdx.x + R + kx];
      }
    }
    out[y * W + x] = acc;
  }
}

void launch_conv2d_3x3(const float* in, float* out, int H, int W, cudaStream_t stream) {
  dim3 block(TILE, TILE);
  dim3 grid((W + TILE - 1) / TILE, (H + TILE - 1) / TILE);
  conv2d_3x3_kernel<<<grid, block, 0, stream>>>(in, out, H, W);
}
