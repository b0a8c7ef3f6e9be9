// silu_bf16.cu — SiLU (swish) activation on bfloat16: y = x * sigmoid(x) = x / (1 + exp(-x)).
// Layout: x, y are contiguous 1-D arrays of n __nv_bfloat16 values (bfloat16 in the spec).
// Grid-stride loop over a grid capped at MAX_BLOCKS; each element is widened to fp32 with
// __bfloat162float, computed with expf, and rounded back with __float2bfloat16 (round-to-nearest).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

#define BLOCK_SIZE 256
#define MAX_BLOCKS 256

__device__ __forceinline__ float silu_f32(float v) { return v / (1.0f + expf(-v)); }

__global__ void silu_bf16_kernel(const __nv_bfloat16* __restrict__ x,
                                 __nv_bfloat16* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const float v = __bfloat162float(x[i]);
    y[i] = __float2bfloat16(silu_f32(v));
  }
}

void launch_silu_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, int n, cudaStream_t stream) {
  int blocks = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  silu_bf16_kernel<<<blocks, BLOCK_SIZE, 0, stream>>>(x, y, n);
}
