// scan_warp.cu — inclusive prefix sum within each block of SCAN_BLOCK = 256 elements:
//   out[i] = in[b*256] + ... + in[i]   for i in block b (each block scans independently).
// Layout: in, out contiguous float32 [n]; the ragged last block reads zeros past n.
// Two-level warp-synchronous scan: each warp scans its 32 values with log2(32) = 5
// __shfl_up_sync steps, lane 31 publishes the warp total to shared memory, warp 0 scans the
// 8 warp totals with the same shuffle scan, and every warp adds the inclusive total of the warps
// before it. Two __syncthreads() in all (vs 16 for a shared-memory Hillis-Steele scan).
// An unsupported family for migration: cuda2nki reports the scan rather than guessing.
#include <cuda_runtime.h>

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_inclusive_scan(float v, int lane) {
#pragma unroll
  for (int offset = 1; offset < WARP_SIZE; offset <<= 1) {
    const float up = __shfl_up_sync(FULL_MASK, v, offset);
    if (lane >= offset) v += up;
  }
  return v;
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    scan_warp_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  constexpr int NUM_WARPS = BLOCK / WARP_SIZE;
  __shared__ float warp_totals[NUM_WARPS];

  const int tid = threadIdx.x;
  const int lane = tid & (WARP_SIZE - 1);
  const int warp = tid / WARP_SIZE;
  const int i = blockIdx.x * BLOCK + tid;

  // Every lane takes part in the shuffles (no early exit): out-of-range lanes carry 0.
  float v = (i < n) ? in[i] : 0.0f;
  v = warp_inclusive_scan(v, lane);
  if (lane == WARP_SIZE - 1) warp_totals[warp] = v;
  __syncthreads();

  if (warp == 0) {
    float t = (lane < NUM_WARPS) ? warp_totals[lane] : 0.0f;
    t = warp_inclusive_scan(t, lane);
    if (lane < NUM_WARPS) warp_totals[lane] = t;
  }
  __syncthreads();

  if (warp > 0) v += warp_totals[warp - 1];
  if (i < n) out[i] = v;
}

#define SCAN_BLOCK 256

cudaError_t launch_scan_warp(const float* in, float* out, int n, cudaStream_t stream) {
  const int blocks = (n + SCAN_BLOCK - 1) / SCAN_BLOCK;
  scan_warp_kernel<SCAN_BLOCK><<<blocks, SCAN_BLOCK, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}
