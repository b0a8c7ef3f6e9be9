// log_softmax.cu — numerically stable row log-softmax:
//   out[r, c] = x[r, c] - max_r - log(sum_c exp(x[r, c] - max_r)).
// Layout: in, out row-major float32 [rows, cols].
// One 256-thread block per row; block-stride loops feed two shared-memory tree reductions
// (max with fmaxf, then sum of expf) over a static __shared__ array, with __syncthreads()
// between halving steps; logf of the sum is folded into a single per-row offset.
#include <cfloat>
#include <cuda_runtime.h>

#define LSM_THREADS 256

template <unsigned BLOCK>
__global__ void log_softmax_kernel(const float* __restrict__ in, float* __restrict__ out,
                                   int rows, int cols) {
  __shared__ float smem[BLOCK];
  const int row = blockIdx.x;
  const unsigned tid = threadIdx.x;
  if (row >= rows) return;
  const float* __restrict__ x = in + static_cast<size_t>(row) * cols;
  float* __restrict__ y = out + static_cast<size_t>(row) * cols;

  // 1) row max
  float m = -FLT_MAX;
  for (int c = tid; c < cols; c += BLOCK) m = fmaxf(m, x[c]);
  smem[tid] = m;
  __syncthreads();
#pragma unroll
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) smem[tid] = fmaxf(smem[tid], smem[tid + s]);
    __syncthreads();
  }
  const float row_max = smem[0];
  __syncthreads();  // all threads read the max before smem is overwritten

  // 2) sum of exp(x - max)
  float sum = 0.0f;
  for (int c = tid; c < cols; c += BLOCK) sum += expf(x[c] - row_max);
  smem[tid] = sum;
  __syncthreads();
#pragma unroll
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (tid < s) smem[tid] += smem[tid + s];
    __syncthreads();
  }
  const float offset = row_max + logf(smem[0]);

  // 3) write x - (max + log(sum))
  for (int c = tid; c < cols; c += BLOCK) y[c] = x[c] - offset;
}

void launch_log_softmax(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  log_softmax_kernel<LSM_THREADS><<<rows, LSM_THREADS, 0, stream>>>(in, out, rows, cols);
}
