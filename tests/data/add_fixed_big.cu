#include <cuda_runtime.h>

// A fixed problem too large to run as written: the host's N is read only by the grid (the
// kernel takes no size and has no bounds check: the launch covers N exactly).
__global__ void add_big(const float* x, const float* y, float* z) {
    const int n = blockDim.x * blockIdx.x + threadIdx.x;
    z[n] = x[n] + 2.0f * y[n];
}

int main() {
    const int N = 100000000;
    const int bytes = sizeof(float) * N;
    float *x, *y, *z;
    cudaMalloc((void**)&x, bytes);
    cudaMalloc((void**)&y, bytes);
    cudaMalloc((void**)&z, bytes);
    const int block_size = 128;
    const int grid_size = N / block_size;
    add_big<<<grid_size, block_size>>>(x, y, z);
    cudaDeviceSynchronize();
    return 0;
}
