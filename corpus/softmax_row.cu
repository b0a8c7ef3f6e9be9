// softmax_row.cu — numerically stable row softmax: out[r, :] = exp(x - max) / sum(exp(x - max)).
// Layout: in, out are row-major float32 [rows, cols].
// One 256-thread block per row; block-stride loops over the columns feed two shared-memory tree
// reductions (max, then sum) in dynamic shared memory of blockDim.x floats.
#include <cfloat>
#include <cuda_runtime.h>

#define SOFTMAX_THREADS 256

__global__ void softmax_row_kernel(const float* __restrict__ in, float* __restrict__ out,
                                   int rows, int cols) {
  extern __shared__ float sbuf[];
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  if (row >= rows) return;
  const float* x = in + static_cast<size_t>(row) * cols;
  float* y = out + static_cast<size_t>(row) * cols;

  float local_max = -FLT_MAX;
  for (int c = tid; c < cols; c += blockDim.x) local_max = fmaxf(local_max, x[c]);
  sbuf[tid] = local_max;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sbuf[tid] = fmaxf(sbuf[tid], sbuf[tid + s]);
    __syncthreads();
  }
  const float row_max = sbuf[0];
  __syncthreads();  // everyone has read the max before sbuf is reused

  float local_sum = 0.0f;
  for (int c = tid; c < cols; c += blockDim.x) local_sum += expf(x[c] - row_max);
  sbuf[tid] = local_sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sbuf[tid] += sbuf[tid + s];
    __syncthreads();
  }
  const float inv_sum = 1.0f / sbuf[0];

  for (int c = tid; c < cols; c += blockDim.x) y[c] = expf(x[c] - row_max) * inv_sum;
}

void launch_softmax_row(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  const size_t smem = SOFTMAX_THREADS * sizeof(float);
  softmax_row_kernel<<<rows, SOFTMAX_THREADS, smem, stream>>>(in, out, rows, cols);
}
