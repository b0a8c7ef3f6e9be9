// attention_mha.cu — multi-head causal attention forward, heads batched:
//   O[b, h, t] = sum_{j <= t} softmax_j(scale * Q[b, h, t] . K[b, h, j]) V[b, h, j]
// Layout: Q, K, V, O all [B, NH, T, HS] float32 (the layout after a qkv permute), HS <= 128.
// Technique: one 64-thread block per (query row, head, batch) — grid (T, NH, B). The scores of
// the row's keys go to dynamic shared memory; the max and the sum are shared-memory tree
// reductions (stride halving with __syncthreads); keys after the query are never scored.
#include <cuda_runtime.h>
#include <math.h>

#define ATT_THREADS 64

__global__ void attention_mha_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                                     const float* __restrict__ V, float* __restrict__ O, int T,
                                     int HS, float scale) {
  extern __shared__ float att[];  // [T] scores, then probabilities
  __shared__ float red[ATT_THREADS];
  const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int NH = gridDim.y;
  const size_t head = ((size_t)b * NH + h) * T * HS;  // start of this (b, h) slice
  const float* q = Q + head + (size_t)t * HS;
  const int tid = threadIdx.x;

  float local_max = -INFINITY;
  for (int j = tid; j <= t; j += blockDim.x) {
    const float* k = K + head + (size_t)j * HS;
    float dot = 0.0f;
    for (int d = 0; d < HS; ++d) dot += q[d] * k[d];
    att[j] = dot * scale;
    local_max = fmaxf(local_max, att[j]);
  }
  red[tid] = local_max;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
    __syncthreads();
  }
  const float row_max = red[0];
  __syncthreads();

  float local_sum = 0.0f;
  for (int j = tid; j <= t; j += blockDim.x) {
    att[j] = expf(att[j] - row_max);
    local_sum += att[j];
  }
  red[tid] = local_sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] += red[tid + s];
    __syncthreads();
  }
  const float norm = 1.0f / red[0];

  for (int d = tid; d < HS; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j <= t; ++j) acc += att[j] * V[head + (size_t)j * HS + d];
    O[head + (size_t)t * HS + d] = acc * norm;
  }
}

void launch_attention_mha(const float* Q, const float* K, const float* V, float* O, int B, int NH,
                          int T, int HS, float scale, cudaStream_t stream) {
  dim3 grid(T, NH, B);
  attention_mha_kernel<<<grid, ATT_THREADS, T * sizeof(float), stream>>>(Q, K, V, O, T, HS,
                                                                         scale);
}
