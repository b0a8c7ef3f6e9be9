// cross_entropy.cu — per-row softmax cross-entropy loss from logits and integer class labels:
//   loss[r] = log(sum_c exp(logits[r, c])) - logits[r, labels[r]]   (stable: max subtracted first).
// Layout: logits row-major float32 [rows, cols]; labels int32 [rows] in [0, cols); loss float32
// [rows]. One 256-thread block per row: block-stride loops, block reductions built from a
// pair of helpers (max / sum) — __shfl_down_sync within each warp, warp results in shared
// memory, the first warp folds them and broadcasts through shared memory; thread 0 writes the loss.
#include <cfloat>
#include <cuda_runtime.h>

#define CE_THREADS 256
#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_reduce_max(float v) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_down_sync(FULL_MASK, v, offset));
  }
  return v;
}

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(FULL_MASK, v, offset);
  }
  return v;
}

// Block max / sum; every thread receives the result. `scratch` has BLOCK / 32 + 1 floats.
template <int BLOCK>
__device__ float block_reduce_max(float v, float* scratch) {
  const int lane = threadIdx.x & (WARP_SIZE - 1);
  const int wid = threadIdx.x / WARP_SIZE;
  v = warp_reduce_max(v);
  if (lane == 0) scratch[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < BLOCK / WARP_SIZE ? scratch[lane] : -FLT_MAX;
    v = warp_reduce_max(v);
    if (lane == 0) scratch[BLOCK / WARP_SIZE] = v;
  }
  __syncthreads();
  const float result = scratch[BLOCK / WARP_SIZE];
  __syncthreads();
  return result;
}

template <int BLOCK>
__device__ float block_reduce_sum(float v, float* scratch) {
  const int lane = threadIdx.x & (WARP_SIZE - 1);
  const int wid = threadIdx.x / WARP_SIZE;
  v = warp_reduce_sum(v);
  if (lane == 0) scratch[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < BLOCK / WARP_SIZE ? scratch[lane] : 0.0f;
    v = warp_reduce_sum(v);
    if (lane == 0) scratch[BLOCK / WARP_SIZE] = v;
  }
  __syncthreads();
  const float result = scratch[BLOCK / WARP_SIZE];
  __syncthreads();
  return result;
}

template <int BLOCK>
__global__ void cross_entropy_fwd_kernel(const float* __restrict__ logits,
                                         const int* __restrict__ labels,
                                         float* __restrict__ loss, int rows, int cols) {
  __shared__ float scratch[BLOCK / WARP_SIZE + 1];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* __restrict__ z = logits + static_cast<size_t>(row) * cols;

  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, z[c]);
  const float row_max = block_reduce_max<BLOCK>(m, scratch);

  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) s += expf(z[c] - row_max);
  const float sum_exp = block_reduce_sum<BLOCK>(s, scratch);

  if (threadIdx.x == 0) {
    const int target = labels[row];
    loss[row] = logf(sum_exp) + row_max - z[target];
  }
}

cudaError_t launch_cross_entropy_fwd(const float* logits, const int* labels, float* loss, int rows,
                                     int cols, cudaStream_t stream) {
  cross_entropy_fwd_kernel<CE_THREADS><<<rows, CE_THREADS, 0, stream>>>(logits, labels, loss,
                                                                         rows, cols);
  return cudaGetLastError();
}
