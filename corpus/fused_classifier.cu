// fused_classifier.cu — the classifier head's softmax cross-entropy, forward and backward in one
// pass over each row (as LLM training code fuses it):
//   losses[r]     = -log(softmax(logits[r])[targets[r]])
//   dlogits[r, c] = (softmax(logits[r])[c] - (c == targets[r])) * dlosses[r]
// Layout: logits, dlogits row-major float32 [rows, vocab]; targets int32 [rows] in [0, vocab);
// dlosses, losses float32 [rows]. One 256-thread block per row. The softmax normaliser is an
// online (max, sum) pair: each thread folds its elements in one pass, pairs merge by comparing
// their maxima (the smaller one's sum rescaled), across the warp by xor shuffles of both fields
// and across warps through a shared array of pairs.
#include <cfloat>
#include <cuda_runtime.h>

#define FC_THREADS 256
#define FULL_MASK 0xffffffffu

// the largest logit seen, and the sum of exp(z - max) over the logits seen
struct Normaliser {
  float max;
  float sum;
};

__device__ __forceinline__ Normaliser merge(Normaliser a, Normaliser b) {
  const bool a_wins = a.max > b.max;
  const Normaliser hi = a_wins ? a : b;
  const Normaliser lo = a_wins ? b : a;
  Normaliser out;
  out.max = hi.max;
  out.sum = hi.sum + lo.sum * __expf(lo.max - hi.max);
  return out;
}

__device__ __forceinline__ Normaliser warp_merge(Normaliser v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    Normaliser other;
    other.max = __shfl_xor_sync(FULL_MASK, v.max, offset);
    other.sum = __shfl_xor_sync(FULL_MASK, v.sum, offset);
    v = merge(v, other);
  }
  return v;
}

__global__ void __launch_bounds__(FC_THREADS)
fused_classifier_kernel(float* __restrict__ dlogits, float* __restrict__ losses,
                        const float* __restrict__ logits, const float* __restrict__ dlosses,
                        const int* __restrict__ targets, int rows, int vocab) {
  __shared__ Normaliser partial[FC_THREADS / 32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* z = logits + static_cast<size_t>(row) * vocab;

  // -FLT_MAX, not -INFINITY: two empty pairs merge to an empty pair, not to NaN
  Normaliser acc = {-FLT_MAX, 0.0f};
  for (int c = threadIdx.x; c < vocab; c += FC_THREADS) {
    const Normaliser one = {z[c], 1.0f};
    acc = merge(acc, one);
  }
  acc = warp_merge(acc);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = acc;
  __syncthreads();
  Normaliser norm = partial[0];
  for (int w = 1; w < FC_THREADS / 32; ++w) norm = merge(norm, partial[w]);

  const int label = targets[row];
  const float inv_sum = 1.0f / norm.sum;
  if (threadIdx.x == 0) {
    losses[row] = -logf(__expf(z[label] - norm.max) * inv_sum);
  }
  const float g = dlosses[row];
  float* dz = dlogits + static_cast<size_t>(row) * vocab;
  for (int c = threadIdx.x; c < vocab; c += FC_THREADS) {
    const float p = __expf(z[c] - norm.max) * inv_sum;
    dz[c] = (p - (c == label ? 1.0f : 0.0f)) * g;
  }
}

// launch: one block per row
cudaError_t launch_fused_classifier(float* dlogits, float* losses, const float* logits,
                                    const float* dlosses, const int* targets, int rows, int vocab,
                                    cudaStream_t stream) {
  fused_classifier_kernel<<<rows, FC_THREADS, 0, stream>>>(dlogits, losses, logits, dlosses,
                                                           targets, rows, vocab);
  return cudaGetLastError();
}
