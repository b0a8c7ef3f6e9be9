#include <cstdlib>
#include <cuda_runtime.h>

// One warp per row of A, each lane reading float4 pieces: the loop runs over (N / 32) / 4
// whole pieces of 128 columns (at least one), so the kernel is written for N % 128 == 0.
// The row pointer is moved to the row's first element before the loop.
__global__ void gemv_f4(float* __restrict__ A, const float* __restrict__ x,
                        float* __restrict__ y, const int M, const int N) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= M) return;
    int pieces = (N / 32) / 4;
    if (pieces == 0) pieces = 1;
    A = &A[row * N];
    float acc = 0.0f;
    for (int p = 0; p < pieces; ++p) {
        const int at = p * 32 + lane;
        float4 a = reinterpret_cast<float4*>(A)[at];
        float4 b = reinterpret_cast<const float4*>(x)[at];
        acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffff, acc, off);
    if (lane == 0) y[row] = acc;
}

int main(int argc, char** argv) {
    const int M = atoi(argv[1]);
    const int N = atoi(argv[2]);
    float *A, *x, *y;
    cudaMalloc(&A, sizeof(float) * M * N);
    cudaMalloc(&x, sizeof(float) * N);
    cudaMalloc(&y, sizeof(float) * M);
    dim3 grid(M / 4);
    dim3 block(32, 4);
    gemv_f4<<<grid, block>>>(A, x, y, M, N);
    cudaDeviceSynchronize();
    return 0;
}
