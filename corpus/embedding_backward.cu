// embedding_backward.cu — backward of a GPT-style token + position embedding:
//   dwte[tokens[b, t], c] += dout[b, t, c]     (rows of the token table's gradient, by id)
//   dwpe[t, c]            += dout[b, t, c]     (the position table's gradient, summed over b)
// Layout: dout float32 [B, T, C]; tokens int32 [B, T] in [0, V); dwte float32 [V, C] and
// dwpe float32 [T, C], both accumulated in place (the caller zeroes them or keeps a running
// gradient). Tokens repeat, so the table rows are added with atomics: a grid-stride loop over
// the B*T*C elements, one element per thread per step, channels innermost for coalescing.
#include <cuda_runtime.h>
#include <cstdint>

#define EMB_BWD_THREADS 256

__global__ void __launch_bounds__(EMB_BWD_THREADS)
embedding_bwd_kernel(float* __restrict__ dwte, float* __restrict__ dwpe,
                     const float* __restrict__ dout, const int* __restrict__ tokens, int B, int T,
                     int C) {
  const int64_t total = static_cast<int64_t>(B) * T * C;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bt = e / C;
    const int c = static_cast<int>(e % C);
    const int t = static_cast<int>(bt % T);
    const int64_t ix = tokens[bt];
    const float g = dout[e];
    atomicAdd(dwte + ix * C + c, g);
    atomicAdd(dwpe + static_cast<int64_t>(t) * C + c, g);
  }
}

void launch_embedding_bwd(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                          int T, int C, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(B) * T * C;
  int blocks = static_cast<int>((total + EMB_BWD_THREADS - 1) / EMB_BWD_THREADS);
  if (blocks > 1024) blocks = 1024;  // the grid-stride loop covers the rest
  embedding_bwd_kernel<<<blocks, EMB_BWD_THREADS, 0, stream>>>(dwte, dwpe, dout, tokens, B, T, C);
}
