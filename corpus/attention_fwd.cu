// attention_fwd.cu — single-head scaled dot-product attention (forward, no mask):
//   O = softmax(Q @ K^T * scale) @ V,  softmax over the key axis of each query row.
// Layout: row-major float32, Q, K, V, O all [S, HEAD_DIM] (HEAD_DIM = 64, a template argument).
// Technique: one BLOCK-thread block per query row. The query row is staged as float4 in a static
// __shared__ array; each thread scores keys j = tid, tid + BLOCK, ... with float4 loads of
// K and the staged q, writing scores[j] to dynamic `extern __shared__` memory (S floats). Block
// max and block sum are __shfl_xor_sync butterflies plus a shared array of per-warp partials;
// scores are exponentiated in place with __expf. Finally each thread owns output columns
// d = tid, tid + BLOCK, ... and accumulates sum_j p[j] * V[j, d] (coalesced across the block).
#include <cfloat>
#include <cuda_runtime.h>

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu
#define ATTN_HEAD_DIM 64
#define ATTN_THREADS 128

__device__ __forceinline__ float warp_allreduce_max(float v) {
#pragma unroll
  for (int mask = WARP_SIZE / 2; mask > 0; mask >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, mask));
  }
  return v;
}

__device__ __forceinline__ float warp_allreduce_sum(float v) {
#pragma unroll
  for (int mask = WARP_SIZE / 2; mask > 0; mask >>= 1) {
    v += __shfl_xor_sync(FULL_MASK, v, mask);
  }
  return v;
}

// Block-wide max / sum; every thread gets the result. `red` holds BLOCK / WARP_SIZE floats.
template <int BLOCK>
__device__ float block_allreduce_max(float v, float* red) {
  const int lane = threadIdx.x % WARP_SIZE;
  const int wid = threadIdx.x / WARP_SIZE;
  v = warp_allreduce_max(v);
  if (lane == 0) red[wid] = v;
  __syncthreads();
  float r = red[0];
#pragma unroll
  for (int w = 1; w < BLOCK / WARP_SIZE; ++w) r = fmaxf(r, red[w]);
  __syncthreads();  // red is reused by the next reduction
  return r;
}

template <int BLOCK>
__device__ float block_allreduce_sum(float v, float* red) {
  const int lane = threadIdx.x % WARP_SIZE;
  const int wid = threadIdx.x / WARP_SIZE;
  v = warp_allreduce_sum(v);
  if (lane == 0) red[wid] = v;
  __syncthreads();
  float r = 0.0f;
#pragma unroll
  for (int w = 0; w < BLOCK / WARP_SIZE; ++w) r += red[w];
  __syncthreads();
  return r;
}

template <int HEAD_DIM, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    attention_fwd_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                         const float* __restrict__ V, float* __restrict__ O, int S, float scale) {
  extern __shared__ float scores[];  // [S]
  __shared__ float4 q_s[HEAD_DIM / 4];
  __shared__ float red[BLOCK / WARP_SIZE];

  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  if (row >= S) return;

  const float4* __restrict__ q4 =
      reinterpret_cast<const float4*>(Q + static_cast<size_t>(row) * HEAD_DIM);
  for (int d4 = tid; d4 < HEAD_DIM / 4; d4 += BLOCK) q_s[d4] = q4[d4];
  __syncthreads();

  // scores[j] = (q . K[j]) * scale, and the running max
  float local_max = -FLT_MAX;
  for (int j = tid; j < S; j += BLOCK) {
    const float4* k4 = reinterpret_cast<const float4*>(K + static_cast<size_t>(j) * HEAD_DIM);
    float dot = 0.0f;
#pragma unroll
    for (int d4 = 0; d4 < HEAD_DIM / 4; ++d4) {
      const float4 a = q_s[d4];
      const float4 b = k4[d4];
      dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    const float s = dot * scale;
    scores[j] = s;
    local_max = fmaxf(local_max, s);
  }
  const float row_max = block_allreduce_max<BLOCK>(local_max, red);

  // p[j] = exp(s[j] - max), in place, and their sum
  float local_sum = 0.0f;
  for (int j = tid; j < S; j += BLOCK) {
    const float e = __expf(scores[j] - row_max);
    scores[j] = e;
    local_sum += e;
  }
  // the barriers inside also publish every thread's scores[] writes
  const float inv_sum = 1.0f / block_allreduce_sum<BLOCK>(local_sum, red);

  // O[row, d] = sum_j p[j] * V[j, d] / sum
  float* __restrict__ o = O + static_cast<size_t>(row) * HEAD_DIM;
  for (int d = tid; d < HEAD_DIM; d += BLOCK) {
    float acc = 0.0f;
    for (int j = 0; j < S; ++j) {
      acc += scores[j] * V[static_cast<size_t>(j) * HEAD_DIM + d];
    }
    o[d] = acc * inv_sum;
  }
}

void launch_attention_fwd(const float* Q, const float* K, const float* V, float* O, int S,
                          float scale, cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(S) * sizeof(float);
  attention_fwd_kernel<ATTN_HEAD_DIM, ATTN_THREADS>
      <<<S, ATTN_THREADS, smem, stream>>>(Q, K, V, O, S, scale);
}
