// attention_causal_online.cu — causal single-head attention in one pass (online softmax):
//   O[t] = sum_{j <= t} softmax_j(scale * Q[t] . K[j]) V[j],  Q, K, V, O all [T, HD] float32.
// Technique: one warp per query row, four rows per 128-thread block; lane l owns the head-dim
// columns l, l + 32, l + 64, l + 96 (HD = 128, a template argument). Keys are visited once in
// order: each score is a warp all-reduce (__shfl_xor_sync butterfly) of the lanes' partial
// dots, and the running max m, running sum l and the accumulators are rescaled by
// exp(m_old - m_new) whenever the max grows (the flash-attention recurrence), so no score is
// stored. Keys after the query are never visited (causal).
#include <cuda_runtime.h>
#include <math.h>

#define FULL_MASK 0xffffffffu

template <int HD>
__global__ void attention_causal_online_kernel(const float* __restrict__ Q,
                                               const float* __restrict__ K,
                                               const float* __restrict__ V,
                                               float* __restrict__ O, int T, float scale) {
  constexpr int PER_LANE = HD / 32;
  const int warps = blockDim.x / 32;
  const int row = blockIdx.x * warps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= T) return;

  float q[PER_LANE];
  float acc[PER_LANE];
#pragma unroll
  for (int c = 0; c < PER_LANE; ++c) {
    q[c] = Q[(size_t)row * HD + lane + 32 * c];
    acc[c] = 0.0f;
  }
  float m = -INFINITY;  // running max of the scores seen so far
  float l = 0.0f;       // running sum of exp(score - m)
  for (int j = 0; j <= row; ++j) {
    const float* k = K + (size_t)j * HD;
    float part = 0.0f;
#pragma unroll
    for (int c = 0; c < PER_LANE; ++c) part += q[c] * k[lane + 32 * c];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) part += __shfl_xor_sync(FULL_MASK, part, off);
    const float s = part * scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * corr + p;
    const float* v = V + (size_t)j * HD;
#pragma unroll
    for (int c = 0; c < PER_LANE; ++c) acc[c] = acc[c] * corr + p * v[lane + 32 * c];
    m = m_new;
  }
  const float inv = 1.0f / l;
#pragma unroll
  for (int c = 0; c < PER_LANE; ++c) O[(size_t)row * HD + lane + 32 * c] = acc[c] * inv;
}

void launch_attention_causal_online(const float* Q, const float* K, const float* V, float* O,
                                    int T, float scale, cudaStream_t stream) {
  const int rows_per_block = 4;
  attention_causal_online_kernel<128>
      <<<(T + rows_per_block - 1) / rows_per_block, 32 * rows_per_block, 0, stream>>>(
          Q, K, V, O, T, scale);
}
