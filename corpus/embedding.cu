// embedding.cu — GPT-style token + position embedding (the encoder of a transformer):
//   out[b*T + t, c] = wte[tokens[b*T + t], c] + wpe[t, c]
// Layout: tokens int32 [B*T] in [0, V); wte float32 [V, C] (token table); wpe float32 [T, C]
// (position table); out float32 [B*T, C]. One 128-thread block per token row, threads striding
// over the channels; the table rows are reached by pointer arithmetic on 64-bit offsets.
#include <cuda_runtime.h>
#include <cstdint>

#define EMB_THREADS 128

__global__ void __launch_bounds__(EMB_THREADS)
embedding_fwd_kernel(float* __restrict__ out, const int* __restrict__ tokens,
                     const float* __restrict__ wte, const float* __restrict__ wpe,
                     int BT, int T, int C) {
  const int row = blockIdx.x;
  if (row >= BT) return;
  const int t = row % T;
  const int64_t ix = tokens[row];
  const float* __restrict__ tok = wte + ix * C;
  const float* __restrict__ pos = wpe + static_cast<int64_t>(t) * C;
  float* __restrict__ dst = out + static_cast<int64_t>(row) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    dst[c] = tok[c] + pos[c];
  }
}

void launch_embedding(float* out, const int* tokens, const float* wte, const float* wpe, int BT,
                      int T, int C, cudaStream_t stream) {
  embedding_fwd_kernel<<<BT, EMB_THREADS, 0, stream>>>(out, tokens, wte, wpe, BT, T, C);
}
