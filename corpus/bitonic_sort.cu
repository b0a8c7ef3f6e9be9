// bitonic_sort.cu — sorts each consecutive segment of SEGMENT = 512 float keys ascending
// (segment b holds keys[b*512 .. b*512+511]; a ragged last segment is padded with +FLT_MAX in
// shared memory and only its valid keys are written back). Layout: keys_in, keys_out float32 [n].
// One block of SEGMENT/2 = 256 threads per segment: the segment is staged in shared memory, then
// the bitonic sorting network runs log2(512)*(log2(512)+1)/2 = 45 compare-exchange stages, each
// thread owning one (pos, pos + stride) pair per stage, with a __syncthreads() between stages
// (after the CUDA samples' bitonicSortShared). Data-dependent swaps: no dense-tile NKI mapping.
#include <cuda_runtime.h>
#include <cfloat>

#define SEGMENT 512
#define SORT_THREADS (SEGMENT / 2)

__device__ __forceinline__ void compare_exchange(float& a, float& b, unsigned ascending) {
  if ((a > b) == (ascending != 0u)) {
    const float t = a;
    a = b;
    b = t;
  }
}

__global__ void __launch_bounds__(SORT_THREADS)
    bitonic_sort_segments_kernel(const float* __restrict__ keys_in, float* __restrict__ keys_out,
                                 int n) {
  __shared__ float s_key[SEGMENT];
  const int base = blockIdx.x * SEGMENT;
  const unsigned tid = threadIdx.x;

  // Each thread stages two keys (coalesced: tid and tid + 256); pad the ragged tail.
  const int i0 = base + tid;
  const int i1 = base + tid + SORT_THREADS;
  s_key[tid] = (i0 < n) ? keys_in[i0] : FLT_MAX;
  s_key[tid + SORT_THREADS] = (i1 < n) ? keys_in[i1] : FLT_MAX;

  // Build bitonic sequences of growing size, alternating direction per half.
  for (unsigned size = 2; size < SEGMENT; size <<= 1) {
    const unsigned dir = ((tid & (size / 2)) == 0u) ? 1u : 0u;
    for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
      __syncthreads();
      const unsigned pos = 2 * tid - (tid & (stride - 1));
      compare_exchange(s_key[pos], s_key[pos + stride], dir);
    }
  }
  // Final bitonic merge of the whole segment, ascending.
  for (unsigned stride = SEGMENT / 2; stride > 0; stride >>= 1) {
    __syncthreads();
    const unsigned pos = 2 * tid - (tid & (stride - 1));
    compare_exchange(s_key[pos], s_key[pos + stride], 1u);
  }
  __syncthreads();

  if (i0 < n) keys_out[i0] = s_key[tid];
  if (i1 < n) keys_out[i1] = s_key[tid + SORT_THREADS];
}

void launch_bitonic_sort_segments(const float* keys_in, float* keys_out, int n,
                                  cudaStream_t stream) {
  const int blocks = (n + SEGMENT - 1) / SEGMENT;
  bitonic_sort_segments_kernel<<<blocks, SORT_THREADS, 0, stream>>>(keys_in, keys_out, n);
}
