#include <cstdlib>
#include <cuda_runtime.h>

// Each block scales one tile of TILE elements; the tile and the switch are template
// arguments named by host constants, and the grid divides by the same constant.
template <int TILE, bool SCALE>
__global__ void tile_scale(const float* x, float* y, float a) {
    const int base = blockIdx.x * TILE;
    for (int i = threadIdx.x; i < TILE; i += blockDim.x) {
        float v = x[base + i];
        y[base + i] = SCALE ? a * v : v;
    }
}

int main(int argc, char** argv) {
    const int n = atoi(argv[1]);
    const int TILE = 512;
    const bool SCALE = true;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    tile_scale<TILE, SCALE><<<n / TILE, 128>>>(x, y, 2.0f);
    cudaDeviceSynchronize();
    return 0;
}
