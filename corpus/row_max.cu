// row_max.cu — row maxima: out[r] = max_c in[r, c] of a rows x cols matrix.
// Layout: in row-major float32 [rows, cols]; out float32 [rows].
// One 256-thread block per row. Each thread folds a block-stride slice with fmaxf starting from
// -FLT_MAX, reading four columns per iteration when the row is 16-byte aligned (float4 loads);
// a static shared array then holds the per-thread maxima for a tree reduction with
// __syncthreads() between halving steps, unrolled down to the last warp.
#include <cfloat>
#include <cuda_runtime.h>

#define ROWMAX_THREADS 256

template <unsigned BLOCK>
__global__ void row_max_kernel(const float* __restrict__ in, float* __restrict__ out, int rows,
                               int cols) {
  __shared__ float smax[BLOCK];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const unsigned tid = threadIdx.x;
  const float* __restrict__ x = in + static_cast<size_t>(row) * cols;

  float m = -FLT_MAX;
  int tail = 0;
  if ((cols & 3) == 0) {  // every row starts 16-byte aligned: vector loads
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const int n4 = cols >> 2;
    for (int i = tid; i < n4; i += BLOCK) {
      const float4 v = x4[i];
      m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    tail = n4 << 2;
  }
  for (int c = tail + tid; c < cols; c += BLOCK) m = fmaxf(m, x[c]);
  smax[tid] = m;
  __syncthreads();

#pragma unroll
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) smax[tid] = fmaxf(smax[tid], smax[tid + s]);
    __syncthreads();
  }
  if (tid == 0) out[row] = smax[0];
}

void launch_row_max(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  row_max_kernel<ROWMAX_THREADS><<<rows, ROWMAX_THREADS, 0, stream>>>(in, out, rows, cols);
}
