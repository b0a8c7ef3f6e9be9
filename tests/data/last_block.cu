// last_block.cu — column sums of x[rows, cols] by a "last block" reduction: each block sums
// its share of the rows into its own partials in `work` (the caller's workspace), takes a
// ticket from a counter kept after the partials, and the block that draws the last ticket
// adds every block's partials into sums. The ticket goes through shared memory that holds
// floats (a float buffer read as unsigned, as llm.c's layernorm backward keeps its flag).
#include <cuda_runtime.h>

__global__ void column_sums_last_block(const float* x, float* sums, float* work, int rows,
                                       int cols) {
  extern __shared__ float smem[];  // cols partials, then the ticket
  unsigned int* ticket = (unsigned int*)(smem + cols);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float s = 0.0f;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) s += x[r * cols + c];
    work[blockIdx.x * cols + c] = s;
  }
  __threadfence();
  __syncthreads();
  unsigned int* counter = (unsigned int*)(work + gridDim.x * cols);
  if (threadIdx.x == 0) *ticket = atomicAdd(counter, 1);
  __syncthreads();
  if (*ticket == gridDim.x - 1) {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      float t = 0.0f;
      for (int b = 0; b < gridDim.x; ++b) t += work[b * cols + c];
      sums[c] = t;
    }
  }
}

void column_sums(const float* x, float* sums, int rows, int cols) {
  const int blocks = 6;
  float* work;
  cudaMalloc(&work, (blocks * cols + 1) * sizeof(float));
  cudaMemset(work, 0, (blocks * cols + 1) * sizeof(float));
  column_sums_last_block<<<blocks, 64, (cols + 1) * sizeof(float)>>>(x, sums, work, rows, cols);
  cudaFree(work);
}
